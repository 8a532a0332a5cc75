// Still Moment's web app: pairing, the timer, the library with uploads, the practice log
// and the schedule. Live state comes as server-sent events from /api/events (no polling).
// Nothing from the server is inserted as HTML: every name and tag becomes text.
'use strict';

const TEXT = {
  en: {
    title: 'Still Moment', tabTimer: 'Timer', tabLibrary: 'Library', tabPractice: 'Practice', tabSchedule: 'Schedule',
    pairTitle: 'Pair this device', pairHelp: 'On the device, run: stillmoment web pair. Enter the PIN it shows.',
    pin: 'PIN', deviceName: 'Name of this device', pairButton: 'Pair', paired: 'Paired.',
    pause: 'Pause', resume: 'Resume', finish: 'Finish', stop: 'Stop', start: 'Start', back15: '−15 s', fwd15: '+15 s',
    newSit: 'New sit', preset: 'Preset', noPreset: '(none: the settings below)', duration: 'Duration (minutes)', open: 'Open-ended sit',
    preparation: 'Preparation (seconds)', gong: 'Gong', gongVolume: 'Gong volume', interval: 'Interval gong every (minutes, 0 = off)',
    intervalMode: 'Interval mode', modeRepeating: 'repeating', modeAfterStart: 'once, after the start', modeBeforeEnd: 'once, before the end',
    intervalGong: 'Interval gong', intervalVolume: 'Interval volume', ambience: 'Ambience', ambienceVolume: 'Ambience volume',
    sections: 'Sections (e.g. sit 25m, walk 5m, sit 25m)', library: 'Library', search: 'Search', importTitle: 'Add from this phone',
    chooseFiles: 'MP3 or M4A files', upload: 'Upload', practice: 'Practice', recent: 'Recent sits', schedule: 'Schedule',
    idle: 'Nothing is playing', starting: 'Starting', phase_preparation: 'Preparation', phase_startGong: 'Start gong',
    phase_running: 'Sitting', phase_endGong: 'End gong', phase_playing: 'Playing', phase_bell: 'Bell', paused: 'Paused',
    remaining: 'remaining', elapsed: 'elapsed', nextGong: 'next gong in', startsIn: 'the voice begins in', section: 'section',
    play: 'Play', preview: 'Preview', resumeAt: 'Resume at', details: 'Gongs and trim', startGong: 'Start gong', endGong: 'End gong',
    off: 'off', trimStart: 'Start at (m:ss)', trimEnd: 'End at (m:ss)', save: 'Save', saved: 'Saved.', del: 'Delete',
    confirmDelete: 'Delete “{name}” from the library? The stored copy is removed.', deleted: 'Deleted.',
    deleteAnyway: 'Delete it anyway? Those entries will not ring until you change them.',
    empty: 'The library is empty: add a file below.', noMatch: 'Nothing matches “{q}”.',
    arrivingHead: 'Arriving from the sync hub', arrivingOf: 'arriving, {have} of {size} MB', hubOnly: 'on the hub only', uploading: 'Uploading {name}…',
    analysing: 'Analysing {name}…', imported: '{name}: added', duplicate: '{name}: already in the library', replaced: '{name}: replaced a damaged copy',
    failed: '{name}: {message}', offline: 'Offline: reconnecting…', daemonDown: 'The player is not running; starting a sit starts it.',
    today: 'Today', week: 'This week', month: 'This month', year: 'This year', all: 'In all', sits: '{n} sits, {m} min',
    noEntries: 'No sits yet.', noSchedules: 'The schedule is empty (stillmoment schedule add …).', enabled: 'On', ringNow: 'Ring now',
    next: 'next', ended_completed: 'Completed', ended_finished: 'Finished', ended_stopped: 'Stopped', ended_replaced: 'Replaced',
    ended_preempted: 'Interrupted', ended_failed: 'Failed', minutes: 'min',
    syncDevice: 'Synced with {hub}, last at {time}', syncNever: 'Paired with {hub}, not synced yet',
    syncWaiting: '{n} change(s) waiting', syncHub: 'This device is the hub for {n} device(s)', syncError: 'Sync: {message}',
  },
  de: {
    title: 'Still Moment', tabTimer: 'Timer', tabLibrary: 'Bibliothek', tabPractice: 'Praxis', tabSchedule: 'Zeitplan',
    pairTitle: 'Dieses Gerät koppeln', pairHelp: 'Auf dem Gerät ausführen: stillmoment web pair. Die angezeigte PIN eingeben.',
    pin: 'PIN', deviceName: 'Name dieses Geräts', pairButton: 'Koppeln', paired: 'Gekoppelt.',
    pause: 'Pause', resume: 'Fortsetzen', finish: 'Beenden', stop: 'Stopp', start: 'Starten', back15: '−15 s', fwd15: '+15 s',
    newSit: 'Neue Sitzung', preset: 'Vorlage', noPreset: '(keine: die Einstellungen unten)', duration: 'Dauer (Minuten)', open: 'Offene Sitzung',
    preparation: 'Vorbereitung (Sekunden)', gong: 'Gong', gongVolume: 'Gong-Lautstärke', interval: 'Intervallgong alle (Minuten, 0 = aus)',
    intervalMode: 'Intervallart', modeRepeating: 'wiederholt', modeAfterStart: 'einmal, nach dem Start', modeBeforeEnd: 'einmal, vor dem Ende',
    intervalGong: 'Intervallgong', intervalVolume: 'Intervall-Lautstärke', ambience: 'Hintergrund', ambienceVolume: 'Hintergrund-Lautstärke',
    sections: 'Abschnitte (z. B. sit 25m, walk 5m, sit 25m)', library: 'Bibliothek', search: 'Suchen', importTitle: 'Von diesem Telefon hinzufügen',
    chooseFiles: 'MP3- oder M4A-Dateien', upload: 'Hochladen', practice: 'Praxis', recent: 'Letzte Sitzungen', schedule: 'Zeitplan',
    idle: 'Es läuft nichts', starting: 'Startet', phase_preparation: 'Vorbereitung', phase_startGong: 'Startgong',
    phase_running: 'Sitzen', phase_endGong: 'Endgong', phase_playing: 'Läuft', phase_bell: 'Glocke', paused: 'Pausiert',
    remaining: 'verbleibend', elapsed: 'vergangen', nextGong: 'nächster Gong in', startsIn: 'die Stimme beginnt in', section: 'Abschnitt',
    play: 'Abspielen', preview: 'Vorhören', resumeAt: 'Fortsetzen bei', details: 'Gongs und Zuschnitt', startGong: 'Startgong', endGong: 'Endgong',
    off: 'aus', trimStart: 'Beginn bei (m:ss)', trimEnd: 'Ende bei (m:ss)', save: 'Speichern', saved: 'Gespeichert.', del: 'Löschen',
    confirmDelete: '„{name}“ aus der Bibliothek löschen? Die gespeicherte Kopie wird entfernt.', deleted: 'Gelöscht.',
    deleteAnyway: 'Trotzdem löschen? Diese Einträge läuten nicht, bis du sie änderst.',
    empty: 'Die Bibliothek ist leer: unten eine Datei hinzufügen.', noMatch: 'Nichts passt zu „{q}“.',
    arrivingHead: 'Unterwegs vom Sync-Hub', arrivingOf: 'unterwegs, {have} von {size} MB', hubOnly: 'nur auf dem Hub', uploading: '{name} wird hochgeladen…',
    analysing: '{name} wird analysiert…', imported: '{name}: hinzugefügt', duplicate: '{name}: schon in der Bibliothek', replaced: '{name}: ersetzt eine beschädigte Kopie',
    failed: '{name}: {message}', offline: 'Offline: verbinde neu…', daemonDown: 'Der Player läuft nicht; eine neue Sitzung startet ihn.',
    today: 'Heute', week: 'Diese Woche', month: 'Dieser Monat', year: 'Dieses Jahr', all: 'Insgesamt', sits: '{n} Sitzungen, {m} Min.',
    noEntries: 'Noch keine Sitzungen.', noSchedules: 'Der Zeitplan ist leer (stillmoment schedule add …).', enabled: 'An', ringNow: 'Jetzt läuten',
    next: 'als Nächstes', ended_completed: 'Vollendet', ended_finished: 'Beendet', ended_stopped: 'Abgebrochen', ended_replaced: 'Ersetzt',
    ended_preempted: 'Unterbrochen', ended_failed: 'Fehlgeschlagen', minutes: 'Min.',
    syncDevice: 'Abgeglichen mit {hub}, zuletzt {time}', syncNever: 'Mit {hub} gekoppelt, noch nicht abgeglichen',
    syncWaiting: '{n} Änderung(en) warten', syncHub: 'Dieses Gerät ist der Hub für {n} Gerät(e)', syncError: 'Abgleich: {message}',
  },
};
const LANG = (navigator.languages && navigator.languages[0] || navigator.language || 'en').toLowerCase().startsWith('de') ? 'de' : 'en';
function t(key, vars) {
  let s = (TEXT[LANG][key] !== undefined ? TEXT[LANG][key] : TEXT.en[key]) || key;
  if (vars) for (const k of Object.keys(vars)) s = s.split('{' + k + '}').join(String(vars[k]));
  return s;
}
const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes, never HTML). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else if (v === true) e.setAttribute(k, '');
    else if (v !== false && v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function clock(ms) {
  const neg = ms < 0; ms = Math.abs(Math.round(ms / 1000));
  const h = Math.floor(ms / 3600), m = Math.floor(ms / 60) % 60, s = ms % 60;
  const mm = h > 0 ? String(m).padStart(2, '0') : String(m);
  return (neg ? '−' : '') + (h > 0 ? h + ':' : '') + mm + ':' + String(s).padStart(2, '0');
}
function parseClock(text) {
  text = text.trim();
  if (text === '') return null;
  const parts = text.split(':').map(Number);
  if (parts.some((p) => !Number.isFinite(p) || p < 0) || parts.length > 3) throw new Error(text);
  return Math.round(parts.reduce((a, p) => a * 60 + p, 0) * 1000);
}

/** A call to the API: JSON in and out; an error carries the server's message. */
async function api(method, path, body) {
  const init = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  const r = await fetch(path, init);
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (r.status === 401 && path !== '/api/pair') { showPairing(); }
  if (!r.ok) {
    const err = new Error((data && data.error && data.error.message) || (r.status + ' ' + r.statusText));
    err.status = r.status;
    throw err;
  }
  return data;
}
function say(id, text) { $(id).textContent = text || ''; }

// MARK: pairing

function showPairing() {
  $('pair').hidden = false; $('tabs').hidden = true; $('now').hidden = true;
  for (const s of document.querySelectorAll('.tab')) s.hidden = true;
  if (events) { events.close(); events = null; }
}
$('pair-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  say('pair-msg', '');
  try {
    await api('POST', '/api/pair', { pin: $('pin').value.trim(), name: $('devname').value.trim() || defaultName() });
    $('pin').value = '';
    start();
  } catch (e) { say('pair-msg', e.message); }
});
function defaultName() {
  const ua = navigator.userAgent;
  const m = ua.match(/\(([^;)]+)/);
  return (m ? m[1] : 'browser').slice(0, 60);
}

// MARK: tabs

function showTab(name) {
  for (const b of document.querySelectorAll('#tabs button')) b.setAttribute('aria-pressed', String(b.dataset.tab === name));
  for (const s of document.querySelectorAll('.tab')) s.hidden = s.id !== name;
  if (name === 'library') loadLibrary();
  if (name === 'practice') loadPractice();
  if (name === 'schedule') loadSchedules();
  try { localStorage.setItem('tab', name); } catch (e) { /* private mode */ }
}
for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => showTab(b.dataset.tab));

// MARK: live state

let events = null;
let status = { state: 'idle' };
function connect() {
  if (events) events.close();
  events = new EventSource('/api/events');
  const onState = (ev) => { say('net', ''); try { render(JSON.parse(ev.data)); } catch (e) { /* a torn message */ } };
  events.addEventListener('state', onState);
  events.addEventListener('progress', onState);
  events.addEventListener('ended', (ev) => {
    try { const e = JSON.parse(ev.data); say('now-msg', e.message ? t('ended_' + e.reason) + ': ' + e.message : ''); } catch (e) { /* ignore */ }
    api('GET', '/api/status').then(render).catch(() => {});
  });
  events.addEventListener('open', () => say('net', ''));
  events.addEventListener('error', () => {
    say('net', t('offline'));
    if (events && events.readyState === EventSource.CLOSED) {
      // Closed for good (the server refused, or is gone): look again in a moment.
      events = null;
      setTimeout(() => api('GET', '/api/me').then(connect).catch(() => {}), 3000);
    }
  });
}
window.addEventListener('online', () => { say('net', ''); if (!events) connect(); });
window.addEventListener('offline', () => say('net', t('offline')));

function render(s) {
  status = s;
  const active = s.state !== 'idle' && s.state !== 'completed' && s.state !== 'stopped';
  $('now').hidden = !active;
  $('b-start').textContent = t('start');
  if (!active) { $('time').textContent = '0:00'; return; }
  const phase = s.state === 'starting' ? t('starting') : t('phase_' + s.state);
  $('phase').textContent = s.paused ? t('paused') + ' · ' + phase : phase;
  let what = '';
  if (s.meditation) what = s.meditation.name + (s.meditation.teacher ? ' · ' + s.meditation.teacher : '');
  if (s.section) what = t('section') + ' ' + (s.section.index + 1) + '/' + s.section.count + ' · ' + s.section.kind;
  $('what').textContent = what;
  let time = '', next = '';
  if (s.source === 'timer') {
    if (s.open || s.remaining === undefined) time = clock(s.elapsed || 0) + '';
    else time = clock(s.remaining);
    if (s.nextGong !== undefined && s.elapsed !== undefined) next = t('nextGong') + ' ' + clock(s.nextGong - s.elapsed);
    if (s.open) next = (next ? next + ' · ' : '') + t('elapsed');
  } else if (s.source === 'guided' || s.source === 'preview') {
    if (s.startsIn !== undefined && s.startsIn > 0) { time = clock(s.startsIn); next = t('startsIn') + ' ' + clock(s.startsIn); }
    else time = clock(s.position || 0);
  } else if (s.source === 'bell') {
    time = '';
  }
  $('time').textContent = time;
  $('next').textContent = next;
  $('b-pause').hidden = !!s.paused;
  $('b-resume').hidden = !s.paused;
  $('b-finish').hidden = s.source !== 'timer';
  $('b-back').hidden = $('b-fwd').hidden = !(s.source === 'guided' || s.source === 'preview');
}
async function command(name, body) {
  say('now-msg', '');
  try { render(await api('POST', '/api/' + name, body)); } catch (e) { say('now-msg', e.message); }
}
$('b-pause').addEventListener('click', () => command('pause'));
$('b-resume').addEventListener('click', () => command('resume'));
$('b-finish').addEventListener('click', () => command('finish'));
$('b-stop').addEventListener('click', () => command('stop'));
$('b-back').addEventListener('click', () => command('seek', { by: -15000 }));
$('b-fwd').addEventListener('click', () => command('seek', { by: 15000 }));

// MARK: the timer form

let choices = null;
async function loadOptions() {
  choices = await api('GET', '/api/options');
  const fill = (select, list, value) => {
    select.replaceChildren(...list.map((s) => el('option', { value: s.id }, s.name)));
    if (value) select.value = value;
  };
  const d = choices.defaults;
  fill($('t-gong'), choices.sounds.gong, d.gong);
  fill($('t-interval-gong'), choices.sounds.interval.concat(choices.sounds.gong), d['interval-gong']);
  fill($('t-ambience'), choices.sounds.ambience, d.ambience);
  $('t-preset').replaceChildren(el('option', { value: '' }, t('noPreset')),
    ...choices.presets.map((p) => el('option', { value: p.name, title: p.summary }, p.name)));
  $('t-duration').value = minutes(d.duration);
  $('t-preparation').value = seconds(d.preparation);
  $('t-gong-volume').value = d['gong-volume'];
  $('t-interval').value = d.interval === 'off' ? 0 : minutes(d.interval === 'on' ? d['interval-length'] : d.interval);
  $('t-interval-mode').value = d['interval-mode'];
  $('t-interval-volume').value = d['interval-volume'];
  $('t-ambience-volume').value = d['ambience-volume'];
}
function minutes(text) { const ms = parseDuration(text); return ms === null ? '' : Math.max(1, Math.round(ms / 60000)); }
function seconds(text) { const ms = parseDuration(text); return ms === null ? 0 : Math.round(ms / 1000); }
function parseDuration(text) {
  if (!text || text === 'off') return null;
  if (text.includes(':')) { try { return parseClock(text); } catch (e) { return null; } }
  let total = 0; const re = /(\d+(?:\.\d+)?)\s*(h|m|s)?/g; let m; let any = false;
  while ((m = re.exec(text)) !== null) { any = true; total += Number(m[1]) * ({ h: 3600000, m: 60000, s: 1000 }[m[2] || 'm']); }
  return any ? total : null;
}
$('timer-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  say('timer-msg', '');
  const preset = $('t-preset').value;
  const options = {};
  if (!preset) {
    if ($('t-open').checked) options.open = 'yes'; else options.duration = $('t-duration').value + 'm';
    options.preparation = Number($('t-preparation').value) > 0 ? $('t-preparation').value + 's' : 'off';
    options.gong = $('t-gong').value;
    options['gong-volume'] = $('t-gong-volume').value;
    const every = Number($('t-interval').value);
    options.interval = every > 0 ? every + 'm' : 'off';
    if (every > 0) {
      options['interval-mode'] = $('t-interval-mode').value;
      options['interval-gong'] = $('t-interval-gong').value;
      options['interval-volume'] = $('t-interval-volume').value;
    }
    options.ambience = $('t-ambience').value;
    options['ambience-volume'] = $('t-ambience-volume').value;
    const sections = $('t-sections').value.trim();
    if (sections) { options.sections = sections; delete options.duration; }
  }
  try {
    render(await api('POST', '/api/timer', preset ? { preset } : { options }));
    $('now').scrollIntoView({ block: 'start' });
  } catch (e) { say('timer-msg', e.message); }
});
$('t-preset').addEventListener('change', () => {
  const none = !$('t-preset').value;
  for (const e of $('timer-form').querySelectorAll('input, select:not(#t-preset)')) e.disabled = !none;
});

// MARK: the library

let meditations = [];
let arriving = [];
async function loadLibrary() {
  try { const lib = await api('GET', '/api/meditations'); meditations = lib.meditations; arriving = lib.arriving || []; showLibrary(); } catch (e) { $('list').replaceChildren(el('p', { role: 'alert' }, e.message)); }
}
$('search').addEventListener('input', () => showLibrary());
function showLibrary() {
  const q = $('search').value.trim().toLowerCase();
  const matches = (m) => !q || [m.name, m.teacher, m.album || ''].some((x) => x.toLowerCase().includes(q));
  const shown = meditations.filter(matches);
  // Synced from another device, their files not here yet: listed, never playable.
  const coming = arriving.filter(matches);
  const mb = (b) => String(Math.floor(b / 1e6));
  const comingList = coming.length === 0 ? [] : [el('h3', {}, t('arrivingHead')), el('ul', { id: 'arriving' }, ...coming.map((a) =>
    el('li', { class: 'arriving' }, (a.teacher ? a.teacher + ' – ' : '') + a.name + ' (' + (a.fetched ? t('arrivingOf', { have: mb(a.have), size: mb(a.bytes) }) : t('hubOnly')) + ')')))];
  if (shown.length === 0) {
    $('list').replaceChildren(el('p', {}, meditations.length === 0 ? t('empty') : t('noMatch', { q: $('search').value.trim() })), ...comingList);
    return;
  }
  const groups = new Map();
  for (const m of shown) { const k = m.teacher || '—'; if (!groups.has(k)) groups.set(k, []); groups.get(k).push(m); }
  const out = [];
  for (const [teacher, list] of groups) {
    out.push(el('h3', {}, teacher));
    out.push(el('ul', {}, ...list.map(item)));
  }
  $('list').replaceChildren(...out, ...comingList);
}
function gongSelect(id, value) {
  const s = el('select', { id }, el('option', { value: 'off' }, t('off')),
    ...(choices ? choices.sounds.gong : []).map((g) => el('option', { value: g.id }, g.name)));
  s.value = value || 'off';
  return s;
}
function item(m) {
  const msg = el('p', { role: 'alert' });
  const play = (body) => async () => { msg.textContent = ''; try { render(await api('POST', '/api/play', body)); window.scrollTo(0, 0); } catch (e) { msg.textContent = e.message; } };
  const actions = el('div', { class: 'actions' },
    el('button', { type: 'button', on: { click: play({ id: m.id }) }, 'aria-label': t('play') + ': ' + m.name }, t('play')),
    m.lastPosition ? el('button', { type: 'button', on: { click: play({ id: m.id, resume: true }) }, 'aria-label': t('resumeAt') + ' ' + clock(m.lastPosition) + ': ' + m.name }, t('resumeAt') + ' ' + clock(m.lastPosition)) : null,
    el('button', { type: 'button', on: { click: play({ id: m.id, preview: true }) }, 'aria-label': t('preview') + ': ' + m.name }, t('preview')));
  const sg = gongSelect('sg-' + m.id, m.startGong), eg = gongSelect('eg-' + m.id, m.endGong);
  const ts = el('input', { id: 'ts-' + m.id, value: m.trimStart ? clock(m.trimStart) : '', inputmode: 'numeric', autocomplete: 'off' });
  const te = el('input', { id: 'te-' + m.id, value: m.trimEnd ? clock(m.trimEnd) : '', inputmode: 'numeric', autocomplete: 'off' });
  const save = async () => {
    msg.textContent = '';
    try {
      const body = { startGong: sg.value, endGong: eg.value, trimStart: parseClock(ts.value), trimEnd: parseClock(te.value) };
      await api('POST', '/api/meditations/' + encodeURIComponent(m.id), body);
      msg.textContent = t('saved');
      loadLibrary();
    } catch (e) { msg.textContent = e.message; }
  };
  const del = async () => {
    if (!window.confirm(t('confirmDelete', { name: m.name }))) return;
    const path = '/api/meditations/' + encodeURIComponent(m.id);
    try { await api('DELETE', path); loadLibrary(); } catch (e) {
      // Used by the schedule: the server names the entries; delete anyway only when asked again.
      if (e.status !== 409 || !window.confirm(e.message + '\n\n' + t('deleteAnyway'))) { msg.textContent = e.message; return; }
      try { await api('DELETE', path + '?force=1'); loadLibrary(); } catch (e2) { msg.textContent = e2.message; }
    }
  };
  const details = el('details', {}, el('summary', {}, t('details')),
    el('form', { on: { submit: (ev) => { ev.preventDefault(); save(); } } },
      el('label', { for: sg.id }, t('startGong')), sg, el('label', { for: eg.id }, t('endGong')), eg,
      el('label', { for: ts.id }, t('trimStart')), ts, el('label', { for: te.id }, t('trimEnd')), te,
      el('div', { class: 'actions' }, el('button', { type: 'submit' }, t('save')),
        el('button', { type: 'button', on: { click: del }, 'aria-label': t('del') + ': ' + m.name }, t('del')))));
  return el('li', { 'data-id': m.id },
    el('div', { class: 'item-head' }, el('span', {}, el('span', { class: 'name' }, m.name), ' ', el('span', { class: 'meta' }, clock(m.duration) + (m.album ? ' · ' + m.album : ''))), actions),
    details, msg);
}

// Uploads: one file at a time, the raw bytes as the body (streamed to disk on the Pi).
$('b-upload').addEventListener('click', async () => {
  const files = Array.from($('files').files || []);
  for (const f of files) await uploadOne(f);
  $('files').value = '';
  loadLibrary();
});
function uploadOne(file) {
  return new Promise((resolve) => {
    const line = el('li', {}, t('uploading', { name: file.name }));
    $('upload-results').prepend(line);
    const bar = $('upload-progress');
    bar.hidden = false; bar.value = 0;
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', '/api/import?name=' + encodeURIComponent(file.name));
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.upload.addEventListener('progress', (ev) => { if (ev.lengthComputable) bar.value = ev.loaded / ev.total; });
    xhr.upload.addEventListener('load', () => { line.textContent = t('analysing', { name: file.name }); });
    xhr.addEventListener('load', () => {
      bar.hidden = true;
      let data = null;
      try { data = JSON.parse(xhr.responseText); } catch (e) { data = null; }
      if (xhr.status === 200 && data) line.textContent = t(data.outcome, { name: file.name });
      else line.textContent = t('failed', { name: file.name, message: (data && data.error && data.error.message) || xhr.status });
      if (xhr.status === 401) showPairing();
      resolve();
    });
    xhr.addEventListener('error', () => { bar.hidden = true; line.textContent = t('failed', { name: file.name, message: t('offline') }); resolve(); });
    xhr.send(file);
  });
}

// MARK: practice and schedule

async function loadPractice() {
  try {
    const p = await api('GET', '/api/practice');
    const rows = [];
    for (const k of ['today', 'week', 'month', 'year', 'all']) {
      const total = p.stats[k];
      rows.push(el('dt', {}, t(k)), el('dd', {}, t('sits', { n: total.sits, m: Math.round(total.milliseconds / 60000) })));
    }
    $('stats').replaceChildren(...rows);
    showSync(p.sync);
    $('entries').replaceChildren(...(p.entries.length ? p.entries.map((e) => el('li', {},
      el('span', {}, e.name), ' ', el('span', { class: 'meta' }, String(e.start).replace('T', ' ').slice(0, 16) + ' · ' +
        Math.round(e.heardMilliseconds / 60000) + ' ' + t('minutes') + ' · ' + t('ended_' + e.endReason))))
      : [el('li', {}, t('noEntries'))]));
  } catch (e) { $('entries').replaceChildren(el('li', { role: 'alert' }, e.message)); }
}
/** Where sync stands: this device's hub and last cycle, or the devices this hub serves. */
function showSync(sync) {
  const parts = [];
  if (sync && sync.hub) {
    parts.push(sync.lastCycle ? t('syncDevice', { hub: sync.hub, time: new Date(sync.lastCycle * 1000).toLocaleString(LANG) })
                              : t('syncNever', { hub: sync.hub }));
    if (sync.pending > 0) parts.push(t('syncWaiting', { n: sync.pending }));
    if (sync.lastError) parts.push(t('syncError', { message: sync.lastError }));
  }
  if (sync && sync.devices > 0) parts.push(t('syncHub', { n: sync.devices }));
  $('sync-state').textContent = parts.join(' · ');
  $('sync-state').hidden = parts.length === 0;
}
async function loadSchedules() {
  try { showSchedules((await api('GET', '/api/schedules')).schedules); } catch (e) { $('schedules').replaceChildren(el('li', { role: 'alert' }, e.message)); }
}
function showSchedules(list) {
  if (list.length === 0) { $('schedules').replaceChildren(el('li', {}, t('noSchedules'))); return; }
  $('schedules').replaceChildren(...list.map((s) => {
    const msg = el('p', { role: 'alert' });
    const box = el('input', { type: 'checkbox', id: 'sch-' + s.id, checked: s.enabled });
    box.addEventListener('change', async () => {
      try { showSchedules((await api('POST', '/api/schedules/' + s.id, { enabled: box.checked })).schedules); } catch (e) { msg.textContent = e.message; box.checked = !box.checked; }
    });
    const ring = el('button', { type: 'button', 'aria-label': t('ringNow') + ': ' + (s.name || s.when) }, t('ringNow'));
    ring.addEventListener('click', async () => { try { render(await api('POST', '/api/schedules/' + s.id + '/ring')); window.scrollTo(0, 0); } catch (e) { msg.textContent = e.message; } });
    return el('li', {}, el('div', { class: 'item-head' },
      el('span', {}, el('span', {}, s.name || s.when), ' ', el('span', { class: 'meta' }, s.when + ' · ' + s.action + (s.next ? ' · ' + t('next') + ' ' + s.next.replace('T', ' ').slice(0, 16) : ''))),
      el('span', { class: 'actions' }, el('label', { class: 'check', for: box.id }, box, ' ', t('enabled')), ring)), msg);
  }));
}

// MARK: start

function translate() {
  document.documentElement.lang = LANG;
  for (const e of document.querySelectorAll('[data-t]')) e.textContent = t(e.dataset.t);
}
async function start() {
  translate();
  try { await api('GET', '/api/me'); } catch (e) { if (e.status === 401) { showPairing(); return; } say('net', t('offline')); setTimeout(start, 3000); return; }
  $('pair').hidden = true;
  $('tabs').hidden = false;
  let tab = 'timer';
  try { tab = localStorage.getItem('tab') || 'timer'; } catch (e) { /* private mode */ }
  showTab(['timer', 'library', 'practice', 'schedule'].includes(tab) ? tab : 'timer');
  loadOptions().catch((e) => say('timer-msg', e.message));
  connect();
}
if ('serviceWorker' in navigator) navigator.serviceWorker.register('/sw.js').catch(() => {});
start();
