from sharing_server.cli import main

raise SystemExit(main())
