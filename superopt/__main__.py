from superopt.cli import main

main()
