// CommunityPresets lives in its own small module (the CLI's demo seed uses it without the profile service's
// dependencies); re-exported so that `import KindredProfile` keeps providing it.
@_exported import KindredPresets
