import sys

from bayesdp.cli import main

sys.exit(main())
