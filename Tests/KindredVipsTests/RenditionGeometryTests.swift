import Testing

@testable import KindredVips

/// The crop and shrink arithmetic, without images.
@Suite struct RenditionGeometryTests {
    @Test(arguments: [
        // source, aspect, expected crop
        (PixelSize(4000, 3000), PixelSize(4, 5), PixelSize(2400, 3000)),  // landscape: sides cut
        (PixelSize(3000, 4000), PixelSize(4, 5), PixelSize(3000, 3750)),  // taller than 4:5: top and bottom cut
        (PixelSize(1080, 1350), PixelSize(4, 5), PixelSize(1080, 1350)),  // exact
        (PixelSize(500, 500), PixelSize(1080, 1350), PixelSize(400, 500)),
        (PixelSize(1, 1), PixelSize(4, 5), PixelSize(1, 1)),  // never empty
        (PixelSize(1, 100), PixelSize(4, 5), PixelSize(1, 1)),
    ])
    func coverCrop(source: PixelSize, aspect: PixelSize, expected: PixelSize) {
        #expect(RenditionGeometry.coverCrop(of: source, aspect: aspect) == expected)
    }

    @Test(arguments: [
        // source (displayed), spec, true output size: the spec, or the source's 4:5 crop when smaller (no upscaling)
        (PixelSize(4000, 3000), PixelSize(1080, 1350), PixelSize(1080, 1350)),
        (PixelSize(1080, 1350), PixelSize(1080, 1350), PixelSize(1080, 1350)),
        (PixelSize(1200, 1300), PixelSize(1080, 1350), PixelSize(1040, 1300)),
        (PixelSize(500, 500), PixelSize(1080, 1350), PixelSize(400, 500)),
        (PixelSize(500, 500), PixelSize(320, 400), PixelSize(320, 400)),
        (PixelSize(84, 105), PixelSize(84, 105), PixelSize(84, 105)),
        (PixelSize(50, 40), PixelSize(84, 105), PixelSize(32, 40)),
    ])
    func outputSize(source: PixelSize, spec: PixelSize, expected: PixelSize) {
        #expect(RenditionGeometry.outputSize(source: source, spec: spec) == expected)
    }

    @Test(arguments: [
        // crop, output, shrink factor
        (PixelSize(2400, 3000), PixelSize(1080, 1350), 2),  // 12 MP landscape JPEG
        (PixelSize(4800, 6000), PixelSize(1080, 1350), 4),
        (PixelSize(9600, 12000), PixelSize(1080, 1350), 8),
        (PixelSize(2000, 2500), PixelSize(1080, 1350), 1),  // halving would leave 1000×1250 < 1080×1350
        (PixelSize(400, 500), PixelSize(400, 500), 1),
    ])
    func loadShrink(crop: PixelSize, output: PixelSize, expected: Int) {
        #expect(RenditionGeometry.loadShrink(crop: crop, output: output) == expected)
    }

    @Test func centredCrop() {
        let rect = RenditionGeometry.centred(PixelSize(2400, 3000), in: PixelSize(4000, 3000))
        #expect(rect == PixelRect(left: 800, top: 0, size: PixelSize(2400, 3000)))
    }
}
