import KindredServiceKit

extension LocationOffset {
    /// The displacement of `user` (see ``LocationOffset/displacement(high:low:)``).
    public func displacement(of user: UserKey) -> (bearing: Double, kilometres: Double) {
        self.displacement(high: user.high, low: user.low)
    }

    /// The published cell centre of `user` whose cell's centre is (`latitude`, `longitude`).
    public func published(user: UserKey, latitude: Double, longitude: Double) -> (latitude: Double, longitude: Double) {
        self.published(high: user.high, low: user.low, latitude: latitude, longitude: longitude)
    }
}
