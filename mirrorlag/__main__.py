from mirrorlag.cli import main

raise SystemExit(main())
