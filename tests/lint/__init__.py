"""Tests of kvcontract-lint."""
