import KindredCLI

await KindredCommand.execute()
