"""The soak's RSS plot: resident memory of every process over time, one colour per process name (a restarted
server continues its line after a gap), a red mark at each kill. Drawn with Pillow (already a test dependency)."""
from PIL import Image, ImageDraw, ImageFont

COLOURS = {"gateway": (31, 119, 180), "auth": (255, 127, 14), "profile": (44, 160, 44), "discovery": (214, 39, 40),
           "match": (148, 103, 189), "chat": (140, 86, 75), "notify": (227, 119, 194), "postgres": (127, 127, 127)}
WIDTH, HEIGHT = 960, 480
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 30, 50


def plot_rss(samples, kills, load_started, path):
    """samples: the soak sampler's (time, name, pid, rss bytes, ...); kills: (name, killed at, back at)."""
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    if not samples:
        draw.text((LEFT, TOP), "no samples", fill="black", font=font)
        image.save(path, optimize=True)
        return
    start = min(s[0] for s in samples)
    end = max(max(s[0] for s in samples), start + 60)
    top_mib = max(s[3] for s in samples) / 2**20 * 1.1
    step = nice_step(top_mib / 6)
    top_mib = step * (int(top_mib / step) + 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(moment):
        return LEFT + (moment - start) / (end - start) * plot_w

    def y(mib):
        return TOP + plot_h - mib / top_mib * plot_h

    # Axes, grid and labels.
    draw.rectangle([LEFT, TOP, LEFT + plot_w, TOP + plot_h], outline="black")
    mib = 0.0
    while mib <= top_mib + 1e-9:
        draw.line([LEFT, y(mib), LEFT + plot_w, y(mib)], fill=(225, 225, 225))
        draw.text((LEFT - 8, y(mib)), f"{mib:g}", fill="black", font=font, anchor="rm")
        mib += step
    minutes = (end - start) / 60
    tick = nice_step(minutes / 8)
    minute = 0.0
    while minute <= minutes + 1e-9:
        draw.line([x(start + minute * 60), TOP + plot_h, x(start + minute * 60), TOP + plot_h + 4], fill="black")
        draw.text((x(start + minute * 60), TOP + plot_h + 8), f"{minute:g}", fill="black", font=font, anchor="mt")
        minute += tick
    draw.text((LEFT + plot_w / 2, HEIGHT - 14), "minutes since the cluster started", fill="black", font=font,
              anchor="mm")
    draw.text((LEFT, 12), "RSS, MiB (postgres: PSS of all its processes)", fill="black", font=font, anchor="lm")
    if load_started:
        draw.line([x(load_started), TOP, x(load_started), TOP + plot_h], fill=(0, 160, 0))
        draw.text((x(load_started) + 3, TOP + 3), "load", fill=(0, 160, 0), font=font)
    for name, killed, _ in kills:
        draw.line([x(killed), TOP, x(killed), TOP + plot_h], fill=(230, 60, 60))
        draw.text((x(killed) + 2, TOP + plot_h - 12), name, fill=(230, 60, 60), font=font)

    # One line per process name, broken where the pid changes.
    names = sorted({s[1] for s in samples}, key=lambda n: list(COLOURS).index(n) if n in COLOURS else 99)
    for row, name in enumerate(names):
        colour = COLOURS.get(name, (0, 0, 0))
        points, pid = [], None
        for moment, sample_name, sample_pid, rss, *_ in samples:
            if sample_name != name:
                continue
            if sample_pid != pid and len(points) > 1:
                draw.line(points, fill=colour, width=2)
            if sample_pid != pid:
                points = []
            pid = sample_pid
            points.append((x(moment), y(rss / 2**20)))
        if len(points) > 1:
            draw.line(points, fill=colour, width=2)
        legend_y = TOP + 10 + row * 18
        draw.line([WIDTH - RIGHT + 15, legend_y, WIDTH - RIGHT + 40, legend_y], fill=colour, width=3)
        draw.text((WIDTH - RIGHT + 46, legend_y), name, fill="black", font=font, anchor="lm")
    image.save(path, optimize=True)


def nice_step(raw):
    """1, 2 or 5 times a power of ten, at least raw."""
    magnitude = 1.0
    while magnitude * 10 <= raw:
        magnitude *= 10
    while magnitude > raw and magnitude > 1e-6:
        magnitude /= 10
    for factor in (1, 2, 5, 10):
        if magnitude * factor >= raw:
            return magnitude * factor
    return magnitude * 10
