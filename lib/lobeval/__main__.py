import sys

from lobeval.cli import main

sys.exit(main())
