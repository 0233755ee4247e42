import sys

from tasks.main import main

sys.exit(main())
