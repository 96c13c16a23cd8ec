"""The PhysioNet 2012 study: grid runner (``run``), one cell (``cell``) and its report (``report``)."""
