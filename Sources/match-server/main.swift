import KindredMatch
import KindredOTel
import KindredServiceKit

await ServerCommand<MatchServerDefinition>.runWithTracing()
