"""What the rig plays, shared by the guest (hw/inside.py) and the host (hw/measure.py).

Each device is played by stillmoment and captured with arecord on the other end of the
snd-aloop cable (hw:Loopback,1,0 records what hw:Loopback,0,0 plays, paced by the guest
kernel). The capture side fixes the format the playback side must use: S32 at 44.1 kHz
for hw (what the engine renders, so the capture must equal the offline render); S16 at
48 kHz for plughw and the dmixes (a Pi's headphone jack: ALSA's plug converts the format,
as `default` does on a Pi image; the daemon opens ALSA without its automatic resampling,
so the engine renders at 48 kHz there)."""

RATE = 44100          # the engine's rate (the renders)
LOUD = 1e-3           # a sample above this is sound (16-bit dither and silence are far below)

# name, what stillmoment plays on, the capture (device, format, rate), the timer session
DEVICES = [
    {"name": "hw", "device": "hw:Loopback,0", "capture": ("hw:Loopback,1,0", "S32_LE", 44100),
     "timer": ["1m", "--interval", "15s", "--ambience", "forest", "--preparation", "2s"], "rounds": 3},
    {"name": "plughw", "device": "plughw:Loopback,0", "capture": ("hw:Loopback,1,0", "S16_LE", 48000),
     "timer": ["30s", "--interval", "10s", "--ambience", "forest", "--preparation", "2s"], "rounds": 2},
    {"name": "dmix", "device": "smdmix", "capture": ("hw:Loopback,1,0", "S16_LE", 48000),
     "timer": ["30s", "--interval", "10s", "--ambience", "forest", "--preparation", "2s"], "rounds": 2},
    {"name": "dmix125", "device": "smdmix125", "capture": ("hw:Loopback,1,0", "S16_LE", 48000),
     "timer": ["30s", "--interval", "10s", "--ambience", "forest", "--preparation", "2s"], "rounds": 2},
]


def chosen(config):
    """The devices this run plays (the rig's config line DEVICES=hw,plughw,dmix,dmix125)."""
    names = config.get("DEVICES", "hw,plughw,dmix,dmix125").split(",")
    return [d for d in DEVICES if d["name"] in names]


# The ALSA configuration the guest writes to ~/.asoundrc: two dmixes on the loopback card
# at 48 kHz, 16 bits, each with a plug in front of it. `smdmix` is ALSA's own `dmix:`
# (alsa-lib's pcm/dmix.conf: periods of 1024 frames, 16 of them), which is what `default`
# is on a Raspberry Pi OS image without a sound server (a plug in front of `dmix:CARD`).
# `smdmix125` is a dmix defined without periods, which then takes the plugin's own
# 125 ms: a deep-period case (it is where a dmix's start alignment showed, and a period
# kept queued by a rewind is longest).
ASOUNDRC = """
pcm.smdmix {
    type plug
    slave.pcm "dmix:CARD=Loopback,DEV=0,FORMAT=S16_LE,RATE=48000"
}
pcm.smdmix125_raw {
    type dmix
    ipc_key 5718
    ipc_perm 0600
    slave {
        pcm "hw:Loopback,0,0"
        format S16_LE
        rate 48000
        channels 2
    }
}
pcm.smdmix125 {
    type plug
    slave.pcm "smdmix125_raw"
}
"""

# The guided meditation: two tones whose frequencies wander on incommensurate slow cycles,
# so that any 0.2-s stretch of it is found at one place only (the next best match of an
# 8192-frame stretch correlates below 0.9) and a skip or a repeat of any length shows;
# its largest sample step is bounded like a plain tone's (about 0.03).
TONE_SECONDS = 60
# (amplitude, base Hz, [(depth Hz, cycle Hz, phase)])
TONE = [(0.2, 440.0, [(150.0, 1.3, 0.0), (60.0, 0.31, 1.0)]),
        (0.1, 613.0, [(90.0, 0.73, 2.0), (40.0, 0.19, 0.5)])]

# The sessions the start latency is measured with.
LATENCY_TIMER = ["1m", "--preparation", "off"]
# Seconds a running daemon is left idle before each start measured (its code pages are
# released after 2 s idle, as they are before any session a user starts).
SETTLE = 2.5
