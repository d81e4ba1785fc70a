import KindredChat
import KindredServiceKit

await ServerCommand<ChatServerDefinition>.runFromCommandLine()
