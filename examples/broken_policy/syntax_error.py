"""A file that does not parse: the lint reports it and checks the other files."""

class Broken(:
    pass
