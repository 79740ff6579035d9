"""Live observation beside the primary manager: the what-if of other capacities and policies."""

from kvcontract.observe.whatif import WhatIfFigure, WhatIfObserver, WhatIfReport, whatif_observer

__all__ = ["WhatIfFigure", "WhatIfObserver", "WhatIfReport", "whatif_observer"]
