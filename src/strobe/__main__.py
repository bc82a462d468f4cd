from strobe.cli import main

raise SystemExit(main())
