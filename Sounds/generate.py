#!/usr/bin/env python3
"""Synthesise Still Moment's bundled sounds (no recordings involved).

    python3 Sounds/generate.py            # writes the audio files and sounds.json next to this script
    python3 Sounds/generate.py --check    # also decodes every file and prints loudness, peaks, seams

Needs python3 with numpy and scipy, and the command-line tools `lame` and `ffmpeg`.
Everything is deterministic: every sound has its own fixed random seed.

Gongs (MP3, LAME -V2 with its Xing/LAME tag so decoders trim encoder delay and padding exactly):
singing-bowl synthesis from inharmonic partials, each a slightly detuned pair (slow beating),
with per-partial exponential decay and a short filtered-noise strike. Onset at sample 0,
fade to exact zero over the last 2 s, loudness-normalised (ITU-R BS.1770-4 / EBU R128).

Ambiences (M4A, AAC-LC, ffmpeg's native encoder; the muxer writes an edit list for the
priming samples): synthesised *circularly* - noise is shaped in the frequency domain of
one FFT the length of the loop, envelopes are periodic, events are added modulo the
length, reverb is a circular convolution - so the signal is exactly periodic and loops
without a seam.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np
from scipy import ndimage, signal

FS = 44100
HERE = Path(__file__).resolve().parent
TAU = 2.0 * np.pi

GONG_SECONDS = 10.0
INTERVAL_SECONDS = 4.5
FADE_SECONDS = 2.0
AMBIENCE_FRAMES = 1292 * 1024    # 30.0002 s: a whole number of AAC frames, so no end padding
GONG_LUFS = -16.0
INTERVAL_LUFS = -20.0
AMBIENCE_LUFS = -16.0
TRUE_PEAK_LIMIT = -1.0      # dBTP, checked on the decoded file
AMBIENCE_CEILING = -2.5     # dBFS sample peak for the ambience limiter (AAC adds some)
TRUE_PEAK_MARGIN = 0.3      # dB kept below the limit before encoding
ONSET_DBFS = -60.0


# --------------------------------------------------------------------------- loudness

def _k_weighting(fs: int):
    """BS.1770 K-weighting biquads for any sample rate (coefficients as in libebur128)."""
    f0, g, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = np.tan(np.pi * f0 / fs)
    vh = 10.0 ** (g / 20.0)
    vb = vh ** 0.4996667741545416
    a0 = 1.0 + k / q + k * k
    b1 = np.array([(vh + vb * k / q + k * k) / a0, 2.0 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0])
    a1 = np.array([1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0])
    f0, q = 38.13547087602444, 0.5003270373238773
    k = np.tan(np.pi * f0 / fs)
    a0 = 1.0 + k / q + k * k
    b2 = np.array([1.0, -2.0, 1.0])
    a2 = np.array([1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0])
    return (b1, a1), (b2, a2)


def integrated_loudness(x: np.ndarray, fs: int = FS) -> float:
    """Gated integrated loudness in LUFS (ITU-R BS.1770-4), x shaped (frames, channels)."""
    (b1, a1), (b2, a2) = _k_weighting(fs)
    y = signal.lfilter(b2, a2, signal.lfilter(b1, a1, x, axis=0), axis=0)
    block, step = int(0.4 * fs), int(0.1 * fs)
    nblocks = 1 + (len(y) - block) // step
    sq = np.concatenate([np.zeros((1, y.shape[1])), np.cumsum(y * y, axis=0)])
    starts = np.arange(nblocks) * step
    z = (sq[starts + block] - sq[starts]) / block          # mean square per block and channel
    power = z.sum(axis=1)
    lk = -0.691 + 10.0 * np.log10(np.maximum(power, 1e-20))
    keep = lk > -70.0
    rel = -0.691 + 10.0 * np.log10(power[keep].mean()) - 10.0
    keep &= lk > rel
    return float(-0.691 + 10.0 * np.log10(power[keep].mean()))


def true_peak_db(x: np.ndarray) -> float:
    """Inter-sample peak estimate by 4x oversampling (as BS.1770-4 Annex 2)."""
    up = signal.resample_poly(x, 4, 1, axis=0)
    return float(20.0 * np.log10(np.max(np.abs(up)) + 1e-20))


# --------------------------------------------------------------------------- helpers

def write_wav16(path: Path, x: np.ndarray) -> None:
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(x.shape[1])
        w.setsampwidth(2)
        w.setframerate(FS)
        w.writeframes(pcm.tobytes())


def run(cmd: list[str]) -> bytes:
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout


def decode(path: Path) -> np.ndarray:
    """Decode with ffmpeg (which honours the LAME tag and the MP4 edit list)."""
    raw = run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-f", "f32le", "-ac", "2", "-"])
    return np.frombuffer(raw, dtype="<f4").reshape(-1, 2).astype(np.float64)


def ffmpeg_r128(path: Path) -> tuple[float, float]:
    """Integrated loudness and true peak as measured by ffmpeg's ebur128 filter."""
    err = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-i", str(path), "-af",
                          "ebur128=peak=true", "-f", "null", "-"],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stderr.decode()
    summary = err[err.rfind("Summary:"):]
    lufs = float(re.search(r"I:\s+(-?[\d.]+) LUFS", summary).group(1))
    peak = float(re.search(r"True peak:\s+Peak:\s+(-?[\d.]+) dBFS", summary).group(1))
    return lufs, peak


def encode_mp3(x: np.ndarray, out: Path, tmp: Path) -> None:
    wav = tmp / (out.stem + ".wav")
    write_wav16(wav, x)
    # -V2 VBR, joint stereo; lame writes the Xing/Info + LAME tag (encoder delay and
    # padding) that gapless decoders (libmpg123, ffmpeg) use to trim to the exact length.
    run(["lame", "--quiet", "--noreplaygain", "-q", "0", "-V", "2", str(wav), str(out)])


def encode_m4a(x: np.ndarray, out: Path, tmp: Path) -> None:
    # ffmpeg's encoder primes 1024 samples and the muxer records them in an edit list
    # (elst media_time 1024). The movie timescale is set to the sample rate so that the
    # elst segment duration is exact in samples (the default 1000 would round to ms), and
    # the length is a whole number of AAC frames, so there is no end padding either:
    # decoders that honour elst and those that only skip the priming give the same frames.
    wav = tmp / (out.stem + ".wav")
    write_wav16(wav, x)
    run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(wav),
         "-c:a", "aac", "-profile:a", "aac_low", "-b:a", "112k", "-ar", str(FS), "-ac", "2",
         "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:a", "+bitexact",
         "-movie_timescale", str(FS), "-movflags", "+faststart", str(out)])


def fade_out(x: np.ndarray, seconds: float) -> np.ndarray:
    m = int(round(seconds * FS))
    w = 0.5 * (1.0 + np.cos(np.pi * np.arange(m) / (m - 1)))   # 1 … exactly 0
    x = x.copy()
    x[-m:] *= w[:, None]
    return x


def pan_gains(p: float) -> tuple[float, float]:
    """Equal-power pan, p in [-1, 1]."""
    a = (p + 1.0) * np.pi / 4.0
    return float(np.cos(a)), float(np.sin(a))


# --------------------------------------------------------------------------- gongs

def bowl(seed: int, seconds: float, f0: float, partials, strike: dict, spread: float) -> np.ndarray:
    """A struck bowl/bell.

    partials: (ratio, amplitude, decay time constant s, beat Hz, attack time constant s)
    Each partial is a pair of sinusoids beat Hz apart (the bowl's split modes); the right
    channel hears the pair with a different relative phase, so the beating sways gently
    across the stereo image. The strike is a band-passed noise burst whose envelope
    t*exp(-t) starts at exactly zero.
    """
    rng = np.random.default_rng(seed)
    n = int(seconds * FS)
    t = np.arange(n) / FS
    out = np.zeros((n, 2))
    for ratio, amp, decay, beat, attack in partials:
        f = f0 * ratio * (1.0 + rng.normal(0.0, 0.0015))
        fa, fb = f - beat / 2.0, f + beat / 2.0
        second = rng.uniform(0.35, 0.65)
        pa, pb = rng.uniform(0.0, TAU, 2)
        shift = spread * rng.uniform(0.5, 1.0) * np.pi
        env = amp * np.exp(-t / decay) * (1.0 - np.exp(-t / attack))
        out[:, 0] += env * (np.sin(TAU * fa * t + pa) + second * np.sin(TAU * fb * t + pb)) / (1 + second)
        out[:, 1] += env * (np.sin(TAU * fa * t + pa + shift / 2)
                            + second * np.sin(TAU * fb * t + pb - shift / 2)) / (1 + second)
    ns = int(0.06 * FS)
    ts = np.arange(ns) / FS
    tau = strike["tau"]
    burst = (ts / tau) * np.exp(1.0 - ts / tau)
    sos = signal.butter(2, [strike["lo"], strike["hi"]], btype="bandpass", fs=FS, output="sos")
    for ch in range(2):
        noise = rng.normal(0.0, 1.0, ns) * burst
        noise = signal.sosfilt(sos, noise)          # causal: output starts at 0 too
        out[:ns, ch] += strike["gain"] * noise / (np.max(np.abs(noise)) + 1e-12)
    return out


GONGS = {
    # Deep, warm temple bell: long bloom, rich middle partials, slow beating.
    "temple-bell": dict(seed=101, f0=146.8, spread=0.5, partials=[
        (1.000, 1.00, 9.0, 0.9, 0.004),
        (2.013, 0.22, 6.0, 1.3, 0.002),
        (2.720, 0.60, 5.2, 1.7, 0.002),
        (4.160, 0.18, 3.2, 2.1, 0.001),
        (5.150, 0.30, 2.6, 2.4, 0.001),
        (8.430, 0.12, 1.3, 2.9, 0.001),
        (12.40, 0.05, 0.7, 3.0, 0.001),
    ], strike=dict(tau=0.0025, lo=300.0, hi=3500.0, gain=0.12)),
    # Classic Tibetan singing bowl: clear fundamental, pronounced wah-wah beating.
    "classic-bowl": dict(seed=202, f0=261.0, spread=0.8, partials=[
        (1.000, 1.00, 7.0, 1.8, 0.003),
        (2.760, 0.55, 4.5, 2.8, 0.0015),
        (5.350, 0.25, 2.2, 3.0, 0.001),
        (8.720, 0.10, 1.1, 2.5, 0.001),
        (12.70, 0.04, 0.6, 2.0, 0.001),
    ], strike=dict(tau=0.0018, lo=400.0, hi=4500.0, gain=0.14)),
    # Large, dark bowl: low fundamental, soft bloom, very slow beating, few high partials.
    "deep-resonance": dict(seed=303, f0=98.0, spread=0.4, partials=[
        (1.000, 1.00, 11.0, 0.5, 0.015),
        (2.680, 0.70, 7.0, 0.8, 0.008),
        (5.060, 0.30, 4.0, 1.1, 0.004),
        (8.180, 0.12, 2.0, 1.4, 0.002),
        (11.90, 0.04, 1.0, 1.6, 0.002),
    ], strike=dict(tau=0.004, lo=150.0, hi=1800.0, gain=0.08)),
    # Small bright bowl struck with a hard mallet: high pitch, crisp strike, shorter ring.
    "clear-strike": dict(seed=404, f0=523.0, spread=0.6, partials=[
        (1.000, 1.00, 5.5, 1.4, 0.0015),
        (2.710, 0.70, 3.5, 2.0, 0.001),
        (5.120, 0.40, 1.8, 2.6, 0.0008),
        (8.260, 0.20, 0.9, 3.0, 0.0008),
        (12.10, 0.08, 0.45, 3.0, 0.0008),
    ], strike=dict(tau=0.0009, lo=1200.0, hi=9000.0, gain=0.22)),
    # Gentle small bowl for interval gongs: soft mallet, short.
    "soft-interval": dict(seed=505, f0=392.0, spread=0.5, partials=[
        (1.000, 1.00, 3.2, 1.2, 0.004),
        (2.740, 0.45, 2.0, 1.8, 0.002),
        (5.200, 0.15, 1.0, 2.2, 0.0015),
        (8.400, 0.05, 0.5, 2.5, 0.0015),
    ], strike=dict(tau=0.003, lo=300.0, hi=3000.0, gain=0.07)),
}


def make_gong(name: str, seconds: float, lufs: float) -> tuple[np.ndarray, float]:
    p = GONGS[name]
    x = bowl(p["seed"], seconds + 0.1, p["f0"], p["partials"], p["strike"], p["spread"])
    n = int(round(seconds * FS))
    gain_db = 0.0
    for _ in range(3):                      # gain → trim → fade → measure converges in 2 rounds
        y = x * 10.0 ** (gain_db / 20.0)
        above = np.nonzero(np.max(np.abs(y), axis=1) > 10.0 ** (ONSET_DBFS / 20.0))[0]
        start = max(int(above[0]) - 1, 0)   # sample 0 just below -60 dBFS, sample 1 above
        y = fade_out(y[start:start + n], FADE_SECONDS)
        gain_db += lufs - integrated_loudness(y)
    y = fade_out((x * 10.0 ** (gain_db / 20.0))[start:start + n], FADE_SECONDS)
    return y, gain_db


# --------------------------------------------------------------------------- ambiences

def spectral_noise(rng, n: int, shape) -> np.ndarray:
    """Periodic (circular) Gaussian noise with magnitude response shape(f), unit RMS."""
    f = np.fft.rfftfreq(n, 1.0 / FS)
    spec = (rng.normal(size=f.size) + 1j * rng.normal(size=f.size)) * shape(np.maximum(f, 1e-3))
    spec[0] = 0.0
    x = np.fft.irfft(spec, n)
    return x / (np.sqrt(np.mean(x * x)) + 1e-20)


def band(lo: float | None, hi: float | None, order: int = 2):
    def h(f):
        g = np.ones_like(f)
        if lo:
            g = g / np.sqrt(1.0 + (lo / f) ** (2 * order))
        if hi:
            g = g / np.sqrt(1.0 + (f / hi) ** (2 * order))
        return g
    return h


def slow_envelope(rng, n: int, cutoff: float) -> np.ndarray:
    """Periodic smooth random curve (zero mean, unit RMS) with content below ~cutoff Hz."""
    return spectral_noise(rng, n, lambda f: np.exp(-0.5 * (f / cutoff) ** 2))


def add_circular(buf: np.ndarray, pos: int, ev: np.ndarray, gl: float, gr: float) -> None:
    idx = (pos + np.arange(ev.size)) % buf.shape[0]
    buf[idx, 0] += gl * ev
    buf[idx, 1] += gr * ev


def circular_reverb(rng, x: np.ndarray, seconds: float, wet: float) -> np.ndarray:
    """Diffuse reverb: circular convolution with decaying noise (keeps the loop periodic)."""
    n = x.shape[0]
    m = int(seconds * FS)
    out = x.copy()
    for ch in range(2):
        ir = np.zeros(n)
        tt = np.arange(m) / FS
        ir[:m] = rng.normal(size=m) * np.exp(-6.9 * tt / seconds)      # -60 dB at the end
        ir[:m] = signal.sosfilt(signal.butter(1, 5000, fs=FS, output="sos"), ir[:m])
        ir /= np.sqrt(np.sum(ir * ir))
        out[:, ch] += wet * np.fft.irfft(np.fft.rfft(x[:, ch]) * np.fft.rfft(ir), n)
    return out


def fm_note(dur: float, f_start: float, f_end: float, curve: float = 1.0,
            vib_rate: float = 0.0, vib_depth: float = 0.0, harm: float = 0.12,
            attack: float = 0.3) -> np.ndarray:
    """One FM chirp: glide from f_start to f_end with vibrato; envelope starts and ends at 0."""
    n = int(dur * FS)
    tt = np.arange(n) / FS
    u = tt / dur
    f = f_start + (f_end - f_start) * u ** curve + vib_depth * np.sin(TAU * vib_rate * tt)
    ph = TAU * np.cumsum(f) / FS
    # asymmetric bell envelope peaking at u = attack
    w = np.where(u < attack, np.sin(0.5 * np.pi * u / attack) ** 2,
                 np.cos(0.5 * np.pi * (u - attack) / (1.0 - attack)) ** 2)
    return w * (np.sin(ph) + harm * np.sin(2.0 * ph))


def bird_call(rng, kind: str) -> np.ndarray:
    parts: list[tuple[float, np.ndarray]] = []
    if kind == "whistler":          # two or three slow, falling whistles
        base = rng.uniform(2600, 3400)
        t = 0.0
        for i in range(int(rng.integers(2, 4))):
            d = rng.uniform(0.18, 0.32)
            parts.append((t, fm_note(d, base * 1.12, base * 0.92, 0.7, 28.0, 40.0, attack=0.25)))
            t += d + rng.uniform(0.08, 0.18)
            base *= rng.uniform(0.93, 1.02)
    elif kind == "trill":           # rapid rising chirps
        base = rng.uniform(3800, 4600)
        count, rate = int(rng.integers(7, 14)), rng.uniform(12.0, 18.0)
        for i in range(count):
            parts.append((i / rate, fm_note(0.035, base, base * 1.45, 0.8, harm=0.08, attack=0.2)
                          * (0.6 + 0.4 * np.sin(np.pi * (i + 0.5) / count))))
    elif kind == "tweet":           # pairs of quick up-down tweets
        base = rng.uniform(5000, 6500)
        t = 0.0
        for i in range(int(rng.integers(2, 5))):
            parts.append((t, fm_note(0.07, base * 0.8, base * 1.15, 0.5, 60.0, 150.0, 0.05, 0.4)))
            parts.append((t + 0.1, fm_note(0.06, base * 1.1, base * 0.75, 1.3, harm=0.05)))
            t += rng.uniform(0.3, 0.5)
    else:                           # "warbler": a wandering phrase of short linked notes
        f = rng.uniform(2800, 3600)
        t = 0.0
        for i in range(int(rng.integers(5, 9))):
            g = f * rng.uniform(0.8, 1.3)
            d = rng.uniform(0.05, 0.11)
            parts.append((t, fm_note(d, f, g, 1.0, 45.0, 80.0, harm=0.1, attack=0.35)))
            t += d + rng.uniform(0.01, 0.04)
            f = float(np.clip(g, 2200, 4800))
    total = int((max(s for s, _ in parts) + max(p.size for _, p in parts) / FS) * FS) + 1
    out = np.zeros(total)
    for s, p in parts:
        i = int(s * FS)
        out[i:i + p.size] += p
    return out


def mix(layers: dict[str, np.ndarray], levels: dict[str, float]) -> np.ndarray:
    """Sum layers, each first set to its own integrated loudness (the relative mix)."""
    return sum(normalise(layers[k], levels[k])[0] for k in levels)


# Relative loudness of the layers (LUFS before the final normalisation of the sum).
FOREST_MIX = {"wind": -25.0, "gusts": -27.0, "leaves": -24.0, "birds": -21.0}


def forest_layers(seed: int = 606) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = AMBIENCE_FRAMES
    gust = slow_envelope(rng, n, 0.08)
    gust = 0.55 + 0.45 * np.tanh(0.9 * gust)                       # 0.1 … 1.0, mostly 0.3–0.8
    wind, gusts, leaves = (np.zeros((n, 2)) for _ in range(3))
    # wind: dark noise, partly common to both channels, plus a breathier band in the gusts
    dark = lambda f: band(70, 450, 2)(f) / np.sqrt(f / 70.0)
    common = spectral_noise(rng, n, dark)
    for ch in range(2):
        wind[:, ch] = (common + spectral_noise(rng, n, dark)) * (0.35 + 0.65 * gust)
        gusts[:, ch] = spectral_noise(rng, n, band(350, 1400, 2)) * gust ** 2
    # leaves: bright noise in short bursts, more of them when the wind gusts
    for ch in range(2):
        flutter = spectral_noise(rng, n, band(1.5, 14.0, 2))
        flutter = np.tanh(1.5 * np.maximum(flutter, 0.0)) ** 2     # soft bursts, bounded
        leaves[:, ch] = (spectral_noise(rng, n, band(1800, 7000, 3)) * flutter
                         * (0.25 + gust ** 1.5))
    # birds: placed wholly inside the loop (none straddles the seam), then a circular reverb
    birds = np.zeros((n, 2))
    kinds = ["whistler", "trill", "tweet", "warbler"]
    t = rng.uniform(0.6, 1.5)
    while True:
        call = bird_call(rng, kinds[int(rng.integers(len(kinds)))])
        far = rng.uniform(0.0, 1.0)
        if far > 0.5:               # distant birds are duller and quieter
            call = signal.sosfilt(signal.butter(2, 4200 - 2000 * far, fs=FS, output="sos"), call)
        pos = int(t * FS)
        if pos + call.size > n - int(0.5 * FS):
            break
        gl, gr = pan_gains(rng.uniform(-0.8, 0.8))
        amp = 1.0 - 0.75 * far
        add_circular(birds, pos, call, gl * amp, gr * amp)
        t += call.size / FS + rng.uniform(0.8, 3.5)
    birds = circular_reverb(rng, birds, 0.7, 0.35)
    return {"wind": wind, "gusts": gusts, "leaves": leaves, "birds": birds}


def make_forest() -> np.ndarray:
    return mix(forest_layers(), FOREST_MIX)


def droplet_tick(rng) -> np.ndarray:
    """A tiny impact: a few ms of bright, quickly decaying noise (0.2 ms rise)."""
    d = rng.uniform(0.0015, 0.005)
    m = int(d * FS) + 12
    tt = np.arange(m) / FS
    env = (1.0 - np.exp(-tt / 0.0002)) * np.exp(-tt / (d / 4.0))
    return np.diff(rng.normal(size=m + 1)) * env * 0.5


def droplet_bubble(rng) -> np.ndarray:
    """A drop hitting water: a damped sinusoid whose pitch rises (Minnaert bubble)."""
    f0 = rng.uniform(1400, 4200)
    tau = rng.uniform(0.004, 0.014)
    m = int(6 * tau * FS)
    tt = np.arange(m) / FS
    f = f0 * (1.0 + rng.uniform(2.0, 8.0) * tt / (6 * tau) * 0.15)
    env = (1.0 - np.exp(-tt / 0.0003)) * np.exp(-tt / tau)
    return env * np.sin(TAU * np.cumsum(f) / FS)


def droplet_drip(rng) -> np.ndarray:
    """A heavier drip on a leaf or a gutter: lower, slightly longer knock."""
    f0 = rng.uniform(700, 1600)
    tau = rng.uniform(0.012, 0.03)
    m = int(6 * tau * FS)
    tt = np.arange(m) / FS
    env = (1.0 - np.exp(-tt / 0.0005)) * np.exp(-tt / tau)
    knock = np.sin(TAU * f0 * tt) + 0.4 * np.sin(TAU * f0 * 2.3 * tt) * np.exp(-tt / (tau / 3))
    return env * knock


RAIN_MIX = {"hiss": -18.0, "rumble": -30.0, "ticks": -24.0, "bubbles": -26.0, "drips": -30.0}


def rain_layers(seed: int = 707) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = AMBIENCE_FRAMES
    swell = 1.0 + 0.12 * slow_envelope(rng, n, 0.06)               # intensity drifts ±12 %
    out = {k: np.zeros((n, 2)) for k in RAIN_MIX}
    soft = lambda f: band(400, 7000, 2)(f) / np.sqrt(f / 400.0)
    common_hiss = spectral_noise(rng, n, soft)
    common_rumble = spectral_noise(rng, n, band(40, 260, 2))
    for ch in range(2):
        out["hiss"][:, ch] = (0.5 * common_hiss + spectral_noise(rng, n, soft)) * swell
        out["rumble"][:, ch] = common_rumble + spectral_noise(rng, n, band(40, 260, 2))
    # droplet transients, Poisson-placed and wrapped modulo the loop length
    events = [("ticks", droplet_tick, 700.0, 0.1, 1.0), ("bubbles", droplet_bubble, 45.0, 0.1, 1.0),
              ("drips", droplet_drip, 2.5, 0.2, 1.0)]
    for key, make, rate, lo, hi in events:
        count = int(rng.poisson(rate * n / FS))
        for pos in np.sort(rng.integers(0, n, count)):
            ev = make(rng)
            amp = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
            gl, gr = pan_gains(rng.uniform(-0.9, 0.9))
            add_circular(out[key], int(pos), ev * amp * swell[pos], gl, gr)
    return out


def make_rain() -> np.ndarray:
    return mix(rain_layers(), RAIN_MIX)


def normalise(x: np.ndarray, lufs: float) -> tuple[np.ndarray, float]:
    gain_db = lufs - integrated_loudness(x)
    return x * 10.0 ** (gain_db / 20.0), gain_db


def circular_limit(x: np.ndarray, ceiling_db: float, window: float = 0.012) -> np.ndarray:
    """Transparent peak limiter for loops: the gain needed at each sample is spread by a
    minimum filter and smoothed by a Hann window of the same length, both wrapping around
    the loop, so the result stays periodic and the gain moves over ~12 ms, never abruptly.
    It acts only on the rare noise peaks above the ceiling."""
    ceiling = 10.0 ** (ceiling_db / 20.0)
    need = np.minimum(1.0, ceiling / np.maximum(np.max(np.abs(x), axis=1), 1e-12))
    w = int(window * FS) | 1
    gain = ndimage.minimum_filter1d(need, w, mode="wrap")
    hann = np.hanning(w + 2)[1:-1]
    gain = ndimage.convolve1d(gain, hann / hann.sum(), mode="wrap")
    return x * gain[:, None]


def normalise_limited(x: np.ndarray, lufs: float, ceiling_db: float) -> np.ndarray:
    for _ in range(3):
        x = circular_limit(normalise(x, lufs)[0], ceiling_db)
    return x


# --------------------------------------------------------------------------- catalogue

CATALOG = [
    dict(id="temple-bell", filename="temple-bell.mp3", kind="gong", volume=1.0,
         name={"en": "Temple Bell", "de": "Tempelglocke"},
         description={"en": "A deep, warm bell with a long, gently swaying tone.",
                      "de": "Eine tiefe, warme Glocke mit langem, sanft schwingendem Klang."}),
    dict(id="classic-bowl", filename="classic-bowl.mp3", kind="gong", volume=1.0,
         name={"en": "Classic Bowl", "de": "Klassische Klangschale"},
         description={"en": "A Tibetan singing bowl with a clear, pulsing hum.",
                      "de": "Eine tibetische Klangschale mit klarem, pulsierendem Summen."}),
    dict(id="deep-resonance", filename="deep-resonance.mp3", kind="gong", volume=1.0,
         name={"en": "Deep Resonance", "de": "Tiefe Resonanz"},
         description={"en": "A large, dark bowl that blooms slowly and hums for a long time.",
                      "de": "Eine große, dunkle Schale, die langsam aufblüht und lange nachklingt."}),
    dict(id="clear-strike", filename="clear-strike.mp3", kind="gong", volume=1.0,
         name={"en": "Clear Strike", "de": "Klarer Anschlag"},
         description={"en": "A small, bright bowl with a crisp strike.",
                      "de": "Eine kleine, helle Schale mit klarem, präzisem Anschlag."}),
    dict(id="soft-interval", filename="soft-interval.mp3", kind="interval", volume=0.75,
         name={"en": "Soft Interval", "de": "Sanfter Intervallton"},
         description={"en": "A short, gentle tone to mark the intervals.",
                      "de": "Ein kurzer, sanfter Ton, der die Intervalle markiert."}),
    dict(id="silent", filename=None, kind="ambience", volume=0.15,
         name={"en": "Silence", "de": "Stille"},
         description={"en": "No background sound.",
                      "de": "Kein Hintergrundklang."}),
    dict(id="forest", filename="forest.m4a", kind="ambience", volume=0.15,
         name={"en": "Forest", "de": "Wald"},
         description={"en": "Wind in the leaves and distant birdsong.",
                      "de": "Wind in den Blättern und Vogelgesang in der Ferne."}),
    dict(id="rain", filename="rain.m4a", kind="ambience", volume=0.15,
         name={"en": "Rain", "de": "Regen"},
         description={"en": "Steady, gentle rain.",
                      "de": "Gleichmäßiger, sanfter Regen."}),
]


# --------------------------------------------------------------------------- main

def mp4_edit_list(path: Path) -> list[tuple[int, int]]:
    """(segment_duration, media_time) entries of the first elst box, for the report."""
    data = path.read_bytes()

    def walk(buf: bytes, want: list[bytes]):
        i = 0
        while i + 8 <= len(buf):
            size = int.from_bytes(buf[i:i + 4], "big")
            typ = buf[i + 4:i + 8]
            hdr = 8
            if size == 1:
                size, hdr = int.from_bytes(buf[i + 8:i + 16], "big"), 16
            body = buf[i + hdr:i + size]
            if typ == want[0]:
                return body if len(want) == 1 else walk(body, want[1:])
            i += max(size, 8)
        return None

    body = walk(data, [b"moov", b"trak", b"edts", b"elst"])
    if body is None:
        return []
    version, count = body[0], int.from_bytes(body[4:8], "big")
    w = 8 if version == 1 else 4
    out, p = [], 8
    for _ in range(count):
        dur = int.from_bytes(body[p:p + w], "big")
        mt = int.from_bytes(body[p + w:p + 2 * w], "big", signed=True)
        out.append((dur, mt))
        p += 2 * w + 4
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this script)")
    ap.add_argument("--check", action="store_true", help="decode every file and print measurements")
    args = ap.parse_args()
    for tool in ("lame", "ffmpeg"):
        if shutil.which(tool) is None:
            print(f"generate.py: `{tool}` not found; install it (apt install {tool}) and run again.",
                  file=sys.stderr)
            return 1
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    expected: dict[str, int] = {}
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        jobs = []
        for name in GONGS:
            seconds, lufs = ((INTERVAL_SECONDS, INTERVAL_LUFS) if name == "soft-interval"
                             else (GONG_SECONDS, GONG_LUFS))
            jobs.append((f"{name}.mp3", lufs,
                         lambda name=name, s=seconds, l=lufs: make_gong(name, s, l)[0], encode_mp3))
        for name, make in (("forest", make_forest), ("rain", make_rain)):
            jobs.append((f"{name}.m4a", AMBIENCE_LUFS,
                         lambda make=make: normalise_limited(make(), AMBIENCE_LUFS, AMBIENCE_CEILING),
                         encode_m4a))
        for fname, lufs, make, encode in jobs:
            x = make()
            target = out_dir / fname
            # Measure the decoded file: correct the small loudness shift the codec causes,
            # and pull the gain down if the true peak would exceed the limit.
            gain_db = min(0.0, TRUE_PEAK_LIMIT - TRUE_PEAK_MARGIN - true_peak_db(x))
            for _ in range(4):
                encode(x * 10.0 ** (gain_db / 20.0), target, tmp)
                d = decode(target)
                got, tp = integrated_loudness(d), true_peak_db(d)
                want = gain_db + (lufs - got)
                want = min(want, gain_db + (TRUE_PEAK_LIMIT - 0.2) - tp)
                if abs(want - gain_db) < 0.05 and tp <= TRUE_PEAK_LIMIT - 0.1:
                    break
                gain_db = want
            if got < lufs - 0.1:
                notes.append(f"{fname}: {got:.1f} LUFS, {lufs - got:.1f} dB under the target "
                             f"to keep the true peak under {TRUE_PEAK_LIMIT} dBTP")
            expected[fname] = x.shape[0]
            print(f"wrote {fname}", flush=True)
    (out_dir / "sounds.json").write_text(json.dumps(CATALOG, ensure_ascii=False, indent=2) + "\n",
                                         encoding="utf-8")
    print("wrote sounds.json")
    for note in notes:
        print("note:", note)

    if not args.check:
        return 0
    ok = True
    print(f"\n{'file':22} {'frames':>8} {'secs':>6} {'KiB':>5} {'LUFS':>6} {'dBTP':>6} "
          f"{'r128 I':>6} {'r128 TP':>7}  onset")
    for fname, frames in expected.items():
        path = out_dir / fname
        d = decode(path)
        lufs, tp = integrated_loudness(d), true_peak_db(d)
        r_i, r_tp = ffmpeg_r128(path)
        first = int(np.nonzero(np.max(np.abs(d), axis=1) > 10 ** (ONSET_DBFS / 20))[0][0])
        print(f"{fname:22} {d.shape[0]:8d} {d.shape[0] / FS:6.2f} {path.stat().st_size / 1024:5.0f} "
              f"{lufs:6.1f} {tp:6.2f} {r_i:6.1f} {r_tp:7.2f}  {first}")
        if d.shape[0] != frames:
            print(f"  !! decoded {d.shape[0]} frames, generated {frames}")
            ok = False
        if max(tp, r_tp) > TRUE_PEAK_LIMIT:
            print("  !! true peak above the limit")
            ok = False
        if fname.endswith(".m4a"):
            steps = np.abs(np.diff(d, axis=0))
            inside = float(steps.max())
            seam = float(np.abs(d[0] - d[-1]).max())
            pct = float(np.mean(steps.max(axis=1) < seam) * 100.0)
            print(f"  loop seam step {seam:.4f} vs largest inside step {inside:.4f} "
                  f"(seam larger than {pct:.1f}% of inside steps); elst {mp4_edit_list(path)}")
            if seam > inside:
                ok = False
    total = sum(p.stat().st_size for p in out_dir.iterdir() if p.is_file())
    print(f"\nSounds folder total: {total / 1024:.0f} KiB")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
