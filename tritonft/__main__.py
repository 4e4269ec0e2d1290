import sys

from tritonft.cli import main

sys.exit(main())
