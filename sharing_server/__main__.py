from sharing_server.admin.cli import main

raise SystemExit(main())
