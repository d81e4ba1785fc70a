/// A generated portrait (a PNG made from a seed) for demo members and for trying photo uploads without a photo of
/// one's own: a coloured background, a head and shoulders in flat colours, and a few decorative circles. Real
/// image bytes that profile's pipeline decodes like any upload; the same seed always gives the same bytes.
///
/// The encoder is the smallest valid one: 8-bit RGB, no interlace, every row with filter 0, compressed by a
/// fixed-Huffman deflate stream whose only matches repeat the previous pixel (distance 3) — flat shapes shrink
/// ~50× — wrapped in zlib (RFC 1950/1951, PNG spec §10).
enum DemoPortrait {
    /// The PNG file of the portrait for `seed`, `width`×`height` pixels (4:5 suits profile's renditions).
    static func png(seed: UInt64, width: Int = 600, height: Int = 750) -> [UInt8] {
        PNGWriter.encode(width: width, height: height, pixels: self.pixels(seed: seed, width: width, height: height))
    }

    /// Row-major RGB bytes of the portrait.
    static func pixels(seed: UInt64, width: Int, height: Int) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        let backgroundIndex = random.below(Self.palette.count)
        let background = Self.palette[backgroundIndex]
        let shirt = Self.palette[(backgroundIndex + 1 + random.below(Self.palette.count - 1)) % Self.palette.count]
        let skin = Self.skins[random.below(Self.skins.count)]
        let hair = Self.hairs[random.below(Self.hairs.count)]
        let w = Double(width), h = Double(height)
        // Decorations behind the person: 3..5 circles in a lighter shade of the background.
        let circles: [(x: Double, y: Double, r: Double)] = (0..<(3 + random.below(3))).map { _ in
            (random.unit() * w, random.unit() * h * 0.6, (0.05 + random.unit() * 0.12) * w)
        }
        let light = (
            UInt8(min(255, Int(background.0) + 40)), UInt8(min(255, Int(background.1) + 40)),
            UInt8(min(255, Int(background.2) + 40))
        )
        let headX = w * (0.42 + random.unit() * 0.16), headY = h * 0.40, headR = w * (0.17 + random.unit() * 0.04)
        let hairLength = 0.2 + random.unit() * 0.9  // how far the hair reaches down the head, in head radii
        let shouldersY = h * 0.86, shouldersRX = w * 0.40, shouldersRY = h * 0.30
        var bytes = [UInt8](repeating: 0, count: width * height * 3)
        for row in 0..<height {
            let y = Double(row) + 0.5
            for column in 0..<width {
                let x = Double(column) + 0.5
                var colour = background
                if circles.contains(where: { ($0.x - x) * ($0.x - x) + ($0.y - y) * ($0.y - y) < $0.r * $0.r }) {
                    colour = light
                }
                let sx = (x - headX) / shouldersRX, sy = (y - shouldersY) / shouldersRY
                if sx * sx + sy * sy < 1 { colour = shirt }
                let dx = x - headX, dy = y - headY
                let distance = dx * dx + dy * dy
                if distance < (headR * 1.08) * (headR * 1.08) && dy < headR * (hairLength - 1) + headR * 0.3 {
                    colour = hair
                }
                if distance < headR * headR && !(dy < -headR * 0.35 && distance > headR * headR * 0.55) {
                    colour = skin
                }
                let offset = (row * width + column) * 3
                bytes[offset] = colour.0
                bytes[offset + 1] = colour.1
                bytes[offset + 2] = colour.2
            }
        }
        return bytes
    }

    private static let palette: [(UInt8, UInt8, UInt8)] = [
        (231, 111, 81), (244, 162, 97), (233, 196, 106), (42, 157, 143), (38, 70, 83), (106, 76, 147),
        (25, 130, 196), (138, 201, 38), (255, 89, 94), (94, 96, 206), (72, 191, 227), (128, 128, 128),
    ]
    private static let skins: [(UInt8, UInt8, UInt8)] = [
        (255, 224, 189), (241, 194, 125), (224, 172, 105), (198, 134, 66), (141, 85, 36), (92, 56, 34),
    ]
    private static let hairs: [(UInt8, UInt8, UInt8)] = [
        (20, 20, 20), (70, 45, 25), (120, 80, 40), (200, 160, 90), (170, 60, 30), (200, 200, 200),
    ]
}

/// A PNG encoder for 8-bit RGB images (see `DemoPortrait`).
enum PNGWriter {
    static func encode(width: Int, height: Int, pixels: [UInt8]) -> [UInt8] {
        precondition(width > 0 && height > 0 && pixels.count == width * height * 3, "RGB bytes of width×height")
        var raw = [UInt8]()
        raw.reserveCapacity((width * 3 + 1) * height)
        for row in 0..<height {
            raw.append(0)  // filter type None
            raw += pixels[(row * width * 3)..<((row + 1) * width * 3)]
        }
        var header = [UInt8]()
        header += bigEndian(UInt32(width))
        header += bigEndian(UInt32(height))
        header += [8, 2, 0, 0, 0]  // depth 8, colour type RGB, deflate, adaptive filtering, no interlace
        var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        file += self.chunk("IHDR", header)
        file += self.chunk("IDAT", Zlib.compress(raw, repeatDistance: 3))
        file += self.chunk("IEND", [])
        return file
    }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(CRC32.checksum(typed))
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}

/// A zlib stream (RFC 1950) of one fixed-Huffman deflate block (RFC 1951 §3.2.6) whose matches all have the
/// same distance: enough for images of flat colours, and a few dozen lines instead of a dependency.
enum Zlib {
    static func compress(_ data: [UInt8], repeatDistance distance: Int) -> [UInt8] {
        precondition((1...4).contains(distance), "distance codes 0...3 only")
        var bits = BitWriter()
        bits.write(1, count: 1)  // BFINAL
        bits.write(1, count: 2)  // BTYPE 01: fixed Huffman codes
        var index = 0
        while index < data.count {
            var length = 0
            if index >= distance {
                while length < 258 && index + length < data.count
                    && data[index + length] == data[index + length - distance]
                {
                    length += 1
                }
            }
            if length >= 3 {
                self.writeLength(length, to: &bits)
                bits.writeHuffman(UInt32(distance - 1), count: 5)  // distance codes 0..3 are distances 1..4
                index += length
            } else {
                self.writeSymbol(Int(data[index]), to: &bits)
                index += 1
            }
        }
        self.writeSymbol(256, to: &bits)  // end of block
        return [0x78, 0x01] + bits.finish() + PNGWriter.bigEndian(Adler32.checksum(data))
    }

    /// A literal/length symbol in the fixed code.
    static func writeSymbol(_ symbol: Int, to bits: inout BitWriter) {
        switch symbol {
        case 0...143: bits.writeHuffman(UInt32(0x30 + symbol), count: 8)
        case 144...255: bits.writeHuffman(UInt32(0x190 + symbol - 144), count: 9)
        case 256...279: bits.writeHuffman(UInt32(symbol - 256), count: 7)
        default: bits.writeHuffman(UInt32(0xC0 + symbol - 280), count: 8)
        }
    }

    /// Match lengths 3...258: the code 257...285 and its extra bits (RFC 1951 §3.2.5).
    static func writeLength(_ length: Int, to bits: inout BitWriter) {
        if length == 258 {
            self.writeSymbol(285, to: &bits)
            return
        }
        var code = 257, base = 3, extra = 0
        while true {
            let size = 1 << extra
            let runs = code < 265 ? 8 : 4  // 257..264 have no extra bits; then 4 codes per extra-bit count
            for _ in 0..<runs {
                if length < base + size {
                    self.writeSymbol(code, to: &bits)
                    if extra > 0 { bits.write(UInt32(length - base), count: extra) }
                    return
                }
                base += size
                code += 1
            }
            extra += 1
        }
    }
}

/// Bits packed least-significant first (deflate's order); Huffman codes go most-significant bit first.
struct BitWriter {
    private(set) var bytes: [UInt8] = []
    private var current: UInt32 = 0
    private var used = 0

    mutating func write(_ value: UInt32, count: Int) {
        for bit in 0..<count { self.push((value >> UInt32(bit)) & 1) }
    }

    mutating func writeHuffman(_ code: UInt32, count: Int) {
        for bit in stride(from: count - 1, through: 0, by: -1) { self.push((code >> UInt32(bit)) & 1) }
    }

    private mutating func push(_ bit: UInt32) {
        self.current |= bit << UInt32(self.used)
        self.used += 1
        if self.used == 8 {
            self.bytes.append(UInt8(self.current))
            self.current = 0
            self.used = 0
        }
    }

    mutating func finish() -> [UInt8] {
        if self.used > 0 { self.bytes.append(UInt8(self.current)) }
        self.current = 0
        self.used = 0
        return self.bytes
    }
}

enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = self.table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}

enum Adler32 {
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        var index = 0
        while index < bytes.count {
            let end = min(bytes.count, index + 5552)  // the most bytes before the sums can overflow
            for byte in bytes[index..<end] {
                a += UInt32(byte)
                b += a
            }
            a %= 65521
            b %= 65521
            index = end
        }
        return b << 16 | a
    }
}

/// SplitMix64: a small, fast generator whose output depends only on its seed (demo data must be repeatable,
/// so `SystemRandomNumberGenerator` will not do).
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { self.state = seed }

    /// A generator for one item of a seeded collection, independent of the others.
    init(seed: UInt64, stream: UInt64, item: UInt64) {
        var mixer = SeededRandom(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ stream &* 0xBF58_476D_1CE4_E5B9 ^ item)
        self.state = mixer.next()
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 0..<bound.
    mutating func below(_ bound: Int) -> Int { Int(self.next() % UInt64(bound)) }

    /// 0..<1.
    mutating func unit() -> Double { Double(self.next() >> 11) / Double(1 << 53) }

    mutating func chance(_ probability: Double) -> Bool { self.unit() < probability }

    mutating func pick<T>(_ items: [T]) -> T { items[self.below(items.count)] }

    /// `count` distinct items in a seeded order.
    mutating func sample<T>(_ items: [T], _ count: Int) -> [T] {
        var pool = items
        var chosen: [T] = []
        while chosen.count < count && !pool.isEmpty { chosen.append(pool.remove(at: self.below(pool.count))) }
        return chosen
    }
}
