from hybrid_memory_ui.cli import main

raise SystemExit(main())
