import KindredOTel
import KindredProfile
import KindredServiceKit

await ServerCommand<ProfileServerDefinition>.runWithTracing()
