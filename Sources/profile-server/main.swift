import KindredProfile
import KindredServiceKit

await ServerCommand<ProfileServerDefinition>.runFromCommandLine()
