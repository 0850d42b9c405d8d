import sys

from bench.build_overhead.run import main

sys.exit(main())
