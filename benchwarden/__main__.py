from benchwarden.cli.main import main

main()
