/// A width and height in pixels.
struct PixelSize: Hashable, Sendable, CustomStringConvertible {
    var width: Int
    var height: Int

    init(_ width: Int, _ height: Int) {
        self.width = width
        self.height = height
    }

    var transposed: PixelSize { PixelSize(self.height, self.width) }
    var description: String { "\(self.width)x\(self.height)" }
}

/// A rectangle inside an image, in pixels.
struct PixelRect: Hashable, Sendable {
    var left: Int
    var top: Int
    var size: PixelSize
}

/// The arithmetic of cover-cropping and shrink-on-load, without images: what to decode, cut and scale so that each
/// rendition comes out at its true size. Tested as a table.
///
/// Decisions: the crop is centred (not libvips's `attention`: a face-finding heuristic would move between
/// renditions and costs a pass over the pixels); the pipeline never upscales — a source smaller than a spec
/// yields the largest crop of the spec's aspect ratio it holds, at that size.
enum RenditionGeometry {
    /// The largest rectangle of `aspect`'s shape that fits in `source` (at least 1×1).
    static func coverCrop(of source: PixelSize, aspect: PixelSize) -> PixelSize {
        if source.width * aspect.height > source.height * aspect.width {
            // Wider than the aspect: full height, cut the sides.
            return PixelSize(max(1, source.height * aspect.width / aspect.height), source.height)
        } else {
            return PixelSize(source.width, max(1, source.width * aspect.height / aspect.width))
        }
    }

    /// The centred `crop` inside `image`.
    static func centred(_ crop: PixelSize, in image: PixelSize) -> PixelRect {
        PixelRect(left: (image.width - crop.width) / 2, top: (image.height - crop.height) / 2, size: crop)
    }

    /// The true size of `spec`'s rendition of a source of (displayed) size `source`: the spec's size when the
    /// source's cover crop is at least that large, otherwise the cover crop itself (no upscaling).
    static func outputSize(source: PixelSize, spec: PixelSize) -> PixelSize {
        let crop = coverCrop(of: source, aspect: spec)
        return crop.width >= spec.width && crop.height >= spec.height ? spec : crop
    }

    /// The largest shrink-on-load factor among `factors` that still leaves the crop at least `output`'s size:
    /// JPEG decodes at 1/2, 1/4 or 1/8 scale in its DCT, skipping most of the work for a large source.
    static func loadShrink(crop: PixelSize, output: PixelSize, factors: [Int] = [8, 4, 2]) -> Int {
        for factor in factors.sorted(by: >)
        where crop.width >= output.width * factor && crop.height >= output.height * factor {
            return factor
        }
        return 1
    }
}
