from ampbench.cli import main

main()
