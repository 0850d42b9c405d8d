import sys

from nvcc_plus.cli import main

sys.exit(main())
