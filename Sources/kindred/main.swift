import KindredCLI

await KindredCommand.main()
