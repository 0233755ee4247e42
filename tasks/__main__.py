import sys

from tasks.runtime.process import main

sys.exit(main())
