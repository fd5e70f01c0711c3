"""The csm command line and the streaming service."""

import os

# Numba's OpenMP pool spins between parallel regions by default; in the service those
# spinning threads take the cores the broker and the event loop need (CPU backend p99 at
# 5,000 updates/s: 46 ms spinning, 16 ms passive, on 2 cores). Set before libgomp loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
