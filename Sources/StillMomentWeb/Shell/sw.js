// Still Moment's service worker: the shell from the cache when the network is away
// (a flaky Wi-Fi), fresh from the Pi when it is there. The API is never cached.
const CACHE = 'stillmoment-shell-1';
const SHELL = ['/', '/app.js', '/app.css', '/manifest.webmanifest', '/icon.svg'];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || url.pathname.startsWith('/api/')) return;
  const key = url.pathname === '/index.html' ? '/' : url.pathname;
  if (!SHELL.includes(key)) return;
  // Network first (the Pi is close), the cache when it does not answer in time.
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), 3000);
      const fresh = await fetch(event.request, { signal: controller.signal });
      clearTimeout(timer);
      if (fresh.ok) cache.put(key, fresh.clone());
      return fresh;
    } catch (e) {
      const cached = await cache.match(key);
      if (cached) return cached;
      throw e;
    }
  })());
});
