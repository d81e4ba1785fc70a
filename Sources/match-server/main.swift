import KindredMatch
import KindredServiceKit

await ServerCommand<MatchServerDefinition>.runFromCommandLine()
