from kevin_tui.cli import main

main()
