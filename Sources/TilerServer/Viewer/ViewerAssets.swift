/// The web viewer's files, compiled into the binary: no bundle lookup, no CDN, nothing
/// fetched at run time. Plain HTML, CSS and JavaScript (no build step); edit them here.
enum ViewerAssets {
    /// `/`: the page. Script errors are collected in `window.tilerErrors`.
    static let indexHTML = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
<title>tiler</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/viewer/viewer.css">
<script>
  // Every script error, unhandled rejection and console.error lands here, so tests
  // (and curious people) can read window.tilerErrors.
  window.tilerErrors = [];
  addEventListener('error', e => { if (e.target === window || !e.target || !e.target.tagName) window.tilerErrors.push(String(e.message || e.error)); }, true);
  addEventListener('unhandledrejection', e => window.tilerErrors.push('unhandled rejection: ' + String(e.reason && e.reason.message || e.reason)));
  (() => { const original = console.error; console.error = (...args) => { window.tilerErrors.push(args.map(String).join(' ')); original.apply(console, args); }; })();
</script>
<script src="/viewer/viewer.js" defer></script>
</head>
<body>
<header class="bar">
  <a class="brand" href="#/" aria-label="tiler: all images">tiler</a>
  <span class="status" id="status" role="status" aria-live="polite"></span>
</header>

<main id="album" class="album" aria-labelledby="album-title">
  <h1 id="album-title" class="visually-hidden">Images</h1>
  <div class="strip-wrap">
    <button class="nav prev" type="button" id="album-prev" aria-label="Previous image">‹</button>
    <ul class="strip" id="strip" aria-roledescription="carousel" aria-label="Images" tabindex="0"></ul>
    <button class="nav next" type="button" id="album-next" aria-label="Next image">›</button>
  </div>
  <div class="pager">
    <div class="dots" id="dots" role="tablist" aria-label="Choose an image"></div>
    <span class="page-number" id="page-number" aria-live="polite"></span>
  </div>
  <p class="empty" id="album-empty" hidden>No pyramids yet. Cut one with <code>tiler cut IMAGE --output ROOT</code>; it appears here without a restart.</p>
</main>

<section id="viewer" class="viewer" hidden aria-label="Image viewer">
  <div class="stage" id="stage" tabindex="0" role="application"
       aria-roledescription="zoomable image"
       aria-label="Image. Drag or use the arrow keys to pan; wheel, pinch, double-click, plus and minus to zoom; 0 to fit.">
    <div class="plane" id="plane"></div>
  </div>
  <div class="controls" role="toolbar" aria-label="View">
    <a class="button" href="#/" id="back" aria-label="Back to all images">☰</a>
    <button class="button" type="button" id="zoom-in" aria-label="Zoom in">+</button>
    <button class="button" type="button" id="zoom-out" aria-label="Zoom out">−</button>
    <button class="button" type="button" id="zoom-fit" aria-label="Fit the image to the window">⤢</button>
    <button class="button" type="button" id="wrap" aria-label="Repeat horizontally (panorama)" aria-pressed="false">↔</button>
    <button class="button" type="button" id="prev-image" aria-label="Previous image">‹</button>
    <button class="button" type="button" id="next-image" aria-label="Next image">›</button>
  </div>
  <div class="info" id="info" aria-live="polite"></div>
</section>
</body>
</html>
"""#

    /// `/viewer/viewer.css`.
    static let css = #"""
:root {
  color-scheme: dark;
  --bg: #111317;
  --panel: rgba(24, 27, 33, 0.86);
  --fg: #e8eaee;
  --dim: #9aa3b2;
  --accent: #5fa8ff;
  /* A page fits the window both ways: 4:3 thumbnail + caption + header + page control. */
  --card: min(78vw, 560px, calc((100vh - 240px) * 4 / 3));
  font: 15px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; background: var(--bg); color: var(--fg); }
body { display: flex; flex-direction: column; overflow: hidden; }
[hidden] { display: none !important; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
a { color: var(--accent); }
:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }

.bar { display: flex; align-items: center; gap: 1rem; padding: .5rem 1rem; background: var(--panel); z-index: 3; }
.brand { font-weight: 700; text-decoration: none; color: var(--fg); letter-spacing: .04em; }
.status { color: var(--dim); font-size: .9rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }

/* The album: a strip of pages that snaps, one image per page, with a page control. */
.album { flex: 1; display: flex; flex-direction: column; justify-content: center; min-height: 0; }
.strip-wrap { position: relative; }
.strip {
  position: relative; list-style: none; margin: 0; padding: 1rem calc((100vw - var(--card)) / 2);
  display: flex; gap: 1.25rem; overflow-x: auto; overflow-y: hidden;
  scroll-snap-type: x mandatory; scroll-behavior: smooth; scrollbar-width: none;
  overscroll-behavior-x: contain;
}
.strip::-webkit-scrollbar { display: none; }
.card {
  flex: 0 0 var(--card); scroll-snap-align: center; scroll-snap-stop: always;
  background: #1b1f26; border-radius: 14px; overflow: hidden;
  box-shadow: 0 8px 30px rgba(0, 0, 0, .35); transition: transform .25s, opacity .25s; opacity: .55; transform: scale(.94);
}
.card.current { opacity: 1; transform: none; }
.card a { display: block; color: inherit; text-decoration: none; }
.thumb { position: relative; aspect-ratio: 4 / 3; background: #0b0d10; display: grid; place-items: center; }
.thumb img { position: absolute; inset: 0; width: 100%; height: 100%; object-fit: contain; opacity: 0; transition: opacity .3s; }
.thumb img.loaded { opacity: 1; }
.caption { padding: .6rem .9rem .8rem; display: flex; justify-content: space-between; gap: .5rem; }
.caption .name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.caption .size { color: var(--dim); white-space: nowrap; }
.nav {
  position: absolute; top: 50%; transform: translateY(-50%); z-index: 2;
  width: 44px; height: 44px; border-radius: 50%; border: 0; background: var(--panel); color: var(--fg);
  font-size: 28px; line-height: 1; cursor: pointer;
}
.nav.prev { left: 1rem; } .nav.next { right: 1rem; }
.nav:disabled { opacity: .3; cursor: default; }
.pager { display: flex; flex-direction: column; align-items: center; gap: .4rem; padding: .5rem 1rem 1.5rem; }
.dots { display: flex; flex-wrap: wrap; justify-content: center; gap: 4px; max-width: 90vw; }
.dots button {
  width: 24px; height: 24px; border: 0; padding: 0; background: none; cursor: pointer; display: grid; place-items: center;
}
.dots button::before { content: ""; width: 8px; height: 8px; border-radius: 50%; background: #4a5260; transition: background .2s, transform .2s; }
.dots button[aria-selected="true"]::before { background: var(--fg); transform: scale(1.25); }
.page-number { color: var(--dim); font-variant-numeric: tabular-nums; }
.empty { text-align: center; color: var(--dim); }

/* The deep-zoom view. */
.viewer { flex: 1; position: relative; min-height: 0; }
.stage { position: absolute; inset: 0; overflow: hidden; touch-action: none; cursor: grab; background: #000; user-select: none; -webkit-user-select: none; }
.stage.dragging { cursor: grabbing; }
.plane { position: absolute; inset: 0; transform-origin: 0 0; }
.plane img { position: absolute; left: 0; top: 0; max-width: none; pointer-events: none; -webkit-user-drag: none; }
.plane img.backdrop { image-rendering: auto; }
.plane img.tile { opacity: 0; transition: opacity .18s; }
.plane img.tile.loaded { opacity: 1; }
.plane img.tile.retiring { z-index: 0; }
.plane img.tile:not(.retiring) { z-index: 1; }
.controls {
  position: absolute; right: .75rem; top: .75rem; display: flex; flex-direction: column; gap: .4rem; z-index: 2;
}
.button {
  display: grid; place-items: center; width: 44px; height: 44px; border-radius: 10px; border: 0;
  background: var(--panel); color: var(--fg); font-size: 20px; text-decoration: none; cursor: pointer;
}
.button[aria-pressed="true"] { background: var(--accent); color: #061224; }
.info {
  position: absolute; left: .75rem; bottom: .75rem; z-index: 2; padding: .3rem .6rem; border-radius: 8px;
  background: var(--panel); color: var(--dim); font-size: .85rem; font-variant-numeric: tabular-nums;
}
@media (max-width: 600px) {
  .nav { display: none; }
  .controls { top: auto; bottom: .75rem; flex-direction: row; flex-wrap: wrap; justify-content: flex-end; left: 40%; }
  .button { width: 40px; height: 40px; }
  .info { bottom: auto; top: .75rem; }
}
@media (prefers-reduced-motion: reduce) {
  .strip { scroll-behavior: auto; }
  .card, .plane img.tile, .thumb img { transition: none; }
}
"""#

    /// `/viewer/viewer.js`: the album and the deep-zoom view.
    static let javaScript = #"""
// tiler's viewer: an album of every pyramid and a deep-zoom view of one.
//
// Album (#/): a strip of pages that snaps, one image per page, thumbnails loaded only as
// they come near the screen, more of /images fetched as the strip nears its end, and a
// page control (dots + "n / total") kept in sync with swipes, keys and taps.
//
// Deep zoom (#/image/ID?x=&y=&z=[&wrap=x]): x, y are the image pixel at the centre of the
// window and z the scale (screen pixels per image pixel). The thumbnail is shown at once,
// stretched over the whole image; the server's /images/ID/visible answers which tiles the
// viewport needs (nearest first, one ring of margin), and tiles are placed at the x, y,
// width, height it returns. Tile elements leaving the screen go back to a pool and are
// reused for the next tiles (UIKit's dequeueReusableTile). wrap=x repeats the image
// sideways without end (panoramas).
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const stats = {
    thumbnailsLoaded: 0, tilesRequested: 0, tilesLoaded: 0, tileErrors: 0,
    tileElementsCreated: 0, tileElementsReused: 0, visibleRequests: 0, levelsLoaded: [],
  };
  const levelsLoaded = new Set();
  const status = (text) => { $('status').textContent = text; };

  async function getJSON(url, signal) {
    const response = await fetch(url, { signal });
    if (!response.ok) {
      let message = response.status + ' ' + response.statusText;
      try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return response.json();
  }
  const isAbort = (e) => e && e.name === 'AbortError';

  // ---------------------------------------------------------------- album
  const album = {
    images: [], total: null, loading: null, current: 0, pageSize: 50,
    strip: $('strip'), dots: $('dots'),
  };

  const thumbObserver = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      const img = entry.target;
      thumbObserver.unobserve(img);
      img.src = img.dataset.src;
    }
  }, { root: album.strip, rootMargin: '0px 50% 0px 50%' });

  const moreObserver = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadMoreImages();
  }, { root: album.strip, rootMargin: '0px 100% 0px 100%' });

  function loadMoreImages() {
    if (album.loading) return album.loading;
    if (album.total !== null && album.images.length >= album.total) return Promise.resolve();
    album.loading = (async () => {
      try {
        const page = await getJSON(`/images?offset=${album.images.length}&limit=${album.pageSize}`);
        album.total = page.total;
        for (const image of page.images) addCard(image);
        $('album-empty').hidden = album.total > 0;
        updatePager();
        const last = album.strip.lastElementChild;
        moreObserver.disconnect();
        if (last && album.images.length < album.total) moreObserver.observe(last);
      } catch (e) {
        status('Could not list the images: ' + e.message);
      } finally {
        album.loading = null;
      }
    })();
    return album.loading;
  }

  function addCard(image) {
    const index = album.images.length;
    album.images.push(image);
    const li = document.createElement('li');
    li.className = 'card';
    li.id = 'card-' + index;
    li.setAttribute('role', 'group');
    li.setAttribute('aria-roledescription', 'slide');
    const a = document.createElement('a');
    a.href = imageHash(image.id);
    a.setAttribute('aria-label', `Open ${image.id}, ${image.width} by ${image.height} pixels`);
    const thumb = document.createElement('div');
    thumb.className = 'thumb';
    const img = document.createElement('img');
    img.alt = image.id;
    img.loading = 'lazy';
    img.decoding = 'async';
    img.width = image.thumbnail.width;
    img.height = image.thumbnail.height;
    img.dataset.src = image.thumbnail.url;
    img.addEventListener('load', () => { img.classList.add('loaded'); stats.thumbnailsLoaded++; });
    img.addEventListener('error', () => { img.alt = image.id + ' (thumbnail missing)'; });
    thumb.append(img);
    const caption = document.createElement('div');
    caption.className = 'caption';
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = image.id;
    const size = document.createElement('span');
    size.className = 'size';
    size.textContent = `${image.width} × ${image.height}`;
    caption.append(name, size);
    a.append(thumb, caption);
    li.append(a);
    album.strip.append(li);
    thumbObserver.observe(img);

    const dot = document.createElement('button');
    dot.type = 'button';
    dot.setAttribute('role', 'tab');
    dot.setAttribute('aria-label', `Image ${index + 1}: ${image.id}`);
    dot.setAttribute('aria-controls', li.id);
    dot.addEventListener('click', () => goToCard(index));
    album.dots.append(dot);
  }

  function updatePager() {
    const n = album.images.length;
    const total = album.total ?? n;
    album.strip.querySelectorAll('.card').forEach((card, i) => {
      card.classList.toggle('current', i === album.current);
      card.setAttribute('aria-label', `${i + 1} of ${total}`);
    });
    album.dots.querySelectorAll('button').forEach((dot, i) => {
      const selected = i === album.current;
      dot.setAttribute('aria-selected', String(selected));
      dot.tabIndex = selected ? 0 : -1;
    });
    $('page-number').textContent = n ? `${album.current + 1} / ${total}` : '';
    $('album-prev').disabled = album.current <= 0;
    $('album-next').disabled = album.current >= total - 1;
  }

  function goToCard(index, smooth = true) {
    if (!album.images.length) return;
    index = Math.max(0, Math.min(index, album.images.length - 1));
    const card = $('card-' + index);
    const left = card.offsetLeft - (album.strip.clientWidth - card.offsetWidth) / 2;
    album.strip.scrollTo({ left, behavior: smooth ? 'smooth' : 'instant' });
    setCurrentCard(index);
    if (index >= album.images.length - 2) loadMoreImages();
  }

  function setCurrentCard(index) {
    if (index === album.current && album.strip.querySelector('.current')) return;
    album.current = index;
    updatePager();
  }

  let stripFrame = 0;
  album.strip.addEventListener('scroll', () => {
    if (stripFrame) return;
    stripFrame = requestAnimationFrame(() => {
      stripFrame = 0;
      // The page is the card nearest the strip's centre.
      const middle = album.strip.scrollLeft + album.strip.clientWidth / 2;
      let best = 0, bestDistance = Infinity;
      album.strip.querySelectorAll('.card').forEach((card, i) => {
        const d = Math.abs(card.offsetLeft + card.offsetWidth / 2 - middle);
        if (d < bestDistance) { bestDistance = d; best = i; }
      });
      setCurrentCard(best);
    });
  }, { passive: true });

  album.strip.addEventListener('keydown', (e) => {
    const keys = { ArrowLeft: -1, ArrowRight: 1, PageUp: -1, PageDown: 1 };
    if (e.key in keys) { e.preventDefault(); goToCard(album.current + keys[e.key]); }
    else if (e.key === 'Home') { e.preventDefault(); goToCard(0); }
    else if (e.key === 'End') { e.preventDefault(); goToCard(album.images.length - 1); }
    else if (e.key === 'Enter' && e.target === album.strip && album.images[album.current]) {
      location.hash = imageHash(album.images[album.current].id);
    }
  });
  album.dots.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      e.preventDefault();
      goToCard(album.current + (e.key === 'ArrowLeft' ? -1 : 1));
      album.dots.children[album.current]?.focus();
    }
  });
  $('album-prev').addEventListener('click', () => goToCard(album.current - 1));
  $('album-next').addEventListener('click', () => goToCard(album.current + 1));

  // ---------------------------------------------------------------- deep zoom
  const stage = $('stage');
  const plane = $('plane');
  const dpr = () => window.devicePixelRatio || 1;

  const viewer = {
    image: null,          // { id, width, height, tileSize, maxLevel, padded, thumbnail }
    cx: 0, cy: 0, scale: 1, wrap: false,
    active: new Map(),    // key → { el, tile, level, loaded }
    pool: [],             // detached <img> elements ready for reuse
    backdrops: [],        // thumbnail copies, one per repetition on screen
    level: null,          // level of the last visible answer
    request: null,        // AbortController of the visible request in flight
    dirty: false,
    sequence: 0,
    hashTimer: 0,
  };

  function imageHash(id, params) {
    return '#/image/' + encodeURIComponent(id) + (params ? '?' + params : '');
  }

  const stageSize = () => ({ w: stage.clientWidth || 1, h: stage.clientHeight || 1 });
  function fitScale() {
    const { w, h } = stageSize();
    const im = viewer.image;
    return Math.min(w / im.width, h / im.height) * 0.95;
  }
  function scaleLimits() {
    const fit = fitScale();
    return { min: Math.min(fit / 2, 1), max: Math.max(8, fit) };
  }

  /** Keeps the view inside the image (or, with wrap, re-centres it in one period). */
  function clampView() {
    const im = viewer.image;
    const { min, max } = scaleLimits();
    viewer.scale = Math.min(max, Math.max(min, viewer.scale));
    viewer.cy = Math.min(im.height, Math.max(0, viewer.cy));
    if (viewer.wrap) {
      // Endless sideways: move the centre back into [0, W) and every placed tile by the
      // same whole number of periods, so nothing on screen moves.
      const k = Math.floor(viewer.cx / im.width);
      if (k !== 0) shiftPlane(-k * im.width);
    } else {
      viewer.cx = Math.min(im.width, Math.max(0, viewer.cx));
    }
  }

  function shiftPlane(dx) {
    viewer.cx += dx;
    const moved = new Map();
    for (const entry of viewer.active.values()) {
      entry.tile = { ...entry.tile, x: entry.tile.x + dx };
      entry.key = tileKey(entry.tile);
      moved.set(entry.key, entry);
    }
    viewer.active = moved;
  }

  const tileKey = (t) => `${t.level}/${t.row}/${t.column}@${t.x}`;

  function viewport() {
    const { w, h } = stageSize();
    const s = viewer.scale;
    return { x: viewer.cx - w / 2 / s, y: viewer.cy - h / 2 / s, width: w / s, height: h / s };
  }

  /** Places the backdrop thumbnails and every active tile for the current view. */
  function render() {
    if (!viewer.image) return;
    const im = viewer.image;
    const v = viewport();
    const s = viewer.scale;
    const place = (el, x, y, w, h) => {
      const left = Math.round((x - v.x) * s), top = Math.round((y - v.y) * s);
      const right = Math.round((x + w - v.x) * s), bottom = Math.round((y + h - v.y) * s);
      el.style.transform = `translate(${left}px, ${top}px)`;
      el.style.width = (right - left) + 'px';
      el.style.height = (bottom - top) + 'px';
    };
    // One thumbnail per repetition of the image that meets the viewport.
    const first = viewer.wrap ? Math.floor(v.x / im.width) : 0;
    const last = viewer.wrap ? Math.floor((v.x + v.width) / im.width) : 0;
    const needed = last - first + 1;
    while (viewer.backdrops.length < needed) {
      const b = document.createElement('img');
      b.className = 'backdrop';
      b.alt = '';
      b.src = im.thumbnail.url;
      plane.prepend(b);
      viewer.backdrops.push(b);
    }
    while (viewer.backdrops.length > needed) viewer.backdrops.pop().remove();
    viewer.backdrops.forEach((b, i) => place(b, (first + i) * im.width, 0, im.width, im.height));
    for (const entry of viewer.active.values()) {
      const t = entry.tile;
      if (!im.padded) { place(entry.el, t.x, t.y, t.width, t.height); continue; }
      // A padded pyramid (tiler cut --pad) has full-size edge tiles: place the whole
      // tile and clip off what lies beyond the image.
      const full = im.tileSize * 2 ** (im.maxLevel - t.level);
      place(entry.el, t.x, t.y, full, full);
      entry.el.style.clipPath = t.width < full || t.height < full
        ? `inset(0 ${100 - 100 * t.width / full}% ${100 - 100 * t.height / full}% 0)` : '';
    }
    const levelText = viewer.level === null ? '' : `level ${viewer.level} · `;
    $('info').textContent = `${levelText}${Math.round(s * 1000) / 10}% · ${Math.round(viewer.cx)}, ${Math.round(viewer.cy)}`;
  }

  let frame = 0;
  /** Re-renders on the next frame and asks the server what the new viewport needs. */
  function viewChanged() {
    clampView();
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); });
    requestVisible();
    clearTimeout(viewer.hashTimer);
    viewer.hashTimer = setTimeout(writeHash, 250);
  }

  function writeHash() {
    if (!viewer.image) return;
    const params = `x=${Math.round(viewer.cx)}&y=${Math.round(viewer.cy)}&z=${+viewer.scale.toPrecision(5)}` +
      (viewer.wrap ? '&wrap=x' : '');
    const hash = imageHash(viewer.image.id, params);
    if (location.hash !== hash) history.replaceState(null, '', hash);
  }

  /** One /visible request in flight at a time; a change meanwhile asks again after it. */
  function requestVisible() {
    if (!viewer.image) return;
    if (viewer.request) { viewer.dirty = true; return; }
    viewer.dirty = false;
    const v = viewport();
    const im = viewer.image;
    const controller = new AbortController();
    viewer.request = controller;
    const sequence = ++viewer.sequence;
    const query = new URLSearchParams({
      x: v.x.toFixed(2), y: v.y.toFixed(2), width: v.width.toFixed(2), height: v.height.toFixed(2),
      scale: (viewer.scale * dpr()).toPrecision(6), margin: '1',
    });
    if (viewer.wrap) query.set('wrap', 'x');
    stats.visibleRequests++;
    getJSON(`/images/${encodeURIComponent(im.id)}/visible?${query}`, controller.signal)
      .then((answer) => { if (sequence === viewer.sequence && viewer.image === im) showTiles(answer); })
      .catch((e) => { if (!isAbort(e)) status('Could not list tiles: ' + e.message); })
      .finally(() => {
        if (viewer.request === controller) viewer.request = null;
        if (viewer.dirty) requestVisible();
      });
  }

  /** Takes an element from the pool (or makes one): dequeueReusableTile. */
  function dequeueTile() {
    let el = viewer.pool.pop();
    if (el) stats.tileElementsReused++;
    else {
      el = document.createElement('img');
      el.alt = '';
      el.decoding = 'async';
      el.draggable = false;
      el.addEventListener('load', () => tileLoaded(el));
      el.addEventListener('error', () => { if (el.dataset.key) { stats.tileErrors++; } });
      stats.tileElementsCreated++;
    }
    return el;
  }

  function enqueueTile(entry) {
    const el = entry.el;
    delete el.dataset.key;
    el.className = '';
    el.style.clipPath = '';
    el.removeAttribute('src');
    el.remove();
    viewer.pool.push(el);
  }

  function tileLoaded(el) {
    const key = el.dataset.key;
    const entry = key && viewer.active.get(key);
    if (!entry || entry.el !== el) return;
    entry.loaded = true;
    el.classList.add('loaded');
    stats.tilesLoaded++;
    if (!levelsLoaded.has(entry.tile.level)) {
      levelsLoaded.add(entry.tile.level);
      stats.levelsLoaded = [...levelsLoaded].sort((a, b) => a - b);
    }
    retireIfCovered();
  }

  /** Tiles of the previous level stay underneath until the new level has loaded. */
  function retireIfCovered() {
    let waiting = false;
    for (const e of viewer.active.values()) if (e.level === viewer.level && !e.loaded) { waiting = true; break; }
    if (waiting) return;
    for (const [key, e] of viewer.active) {
      if (e.level !== viewer.level) { viewer.active.delete(key); enqueueTile(e); }
    }
  }

  function showTiles(answer) {
    viewer.level = answer.level;
    const wanted = new Map(answer.tiles.map((t) => [tileKey(t), t]));
    // Off screen, same level: back to the pool at once. Other levels: retire later.
    for (const [key, entry] of viewer.active) {
      if (wanted.has(key)) continue;
      if (entry.level === answer.level || !entry.loaded) { viewer.active.delete(key); enqueueTile(entry); }
      else entry.el.classList.add('retiring');
    }
    const fragment = document.createDocumentFragment();
    for (const [key, tile] of wanted) {
      const kept = viewer.active.get(key);
      if (kept) { kept.el.classList.remove('retiring'); continue; }
      const el = dequeueTile();
      el.dataset.key = key;
      el.className = 'tile';
      el.src = tile.url;
      stats.tilesRequested++;
      viewer.active.set(key, { el, tile, key, level: tile.level, loaded: false });
      fragment.append(el);
    }
    plane.append(fragment);
    clearTimeout(viewer.retireTimer);
    viewer.retireTimer = setTimeout(() => {
      for (const [key, e] of viewer.active) if (e.level !== viewer.level) { viewer.active.delete(key); enqueueTile(e); }
    }, 2000);
    retireIfCovered();
    render();
  }

  function zoomAt(px, py, factor) {
    const s = viewer.scale;
    const ix = viewer.cx + (px - stageSize().w / 2) / s;
    const iy = viewer.cy + (py - stageSize().h / 2) / s;
    const { min, max } = scaleLimits();
    const next = Math.min(max, Math.max(min, s * factor));
    viewer.cx = ix - (px - stageSize().w / 2) / next;
    viewer.cy = iy - (py - stageSize().h / 2) / next;
    viewer.scale = next;
    viewChanged();
  }
  const zoomCentre = (factor) => zoomAt(stageSize().w / 2, stageSize().h / 2, factor);
  function panBy(dx, dy) {  // in screen pixels
    viewer.cx += dx / viewer.scale;
    viewer.cy += dy / viewer.scale;
    viewChanged();
  }
  function fit() {
    viewer.scale = fitScale();
    viewer.cx = viewer.image.width / 2;
    viewer.cy = viewer.image.height / 2;
    viewChanged();
  }

  function clearViewer() {
    for (const entry of viewer.active.values()) enqueueTile(entry);
    viewer.active.clear();
    viewer.backdrops.forEach((b) => b.remove());
    viewer.backdrops = [];
    viewer.level = null;
    if (viewer.request) viewer.request.abort();
    viewer.request = null;
    viewer.sequence++;
  }

  async function openImage(id, params) {
    $('album').hidden = true;
    $('viewer').hidden = false;
    let image = album.images.find((im) => im.id === id);
    if (!viewer.image || viewer.image.id !== id) {
      clearViewer();
      viewer.image = null;
      try {
        if (!image) image = await getJSON('/images/' + encodeURIComponent(id));
      } catch (e) {
        status(e.status === 404 ? `There is no image named “${id}”.` : 'Could not open the image: ' + e.message);
        return;
      }
      viewer.image = image;
      document.title = `${image.id} · tiler`;
    }
    status(`${image.id} · ${image.width} × ${image.height}`);
    const x = parseFloat(params.get('x')), y = parseFloat(params.get('y')), z = parseFloat(params.get('z'));
    viewer.wrap = params.has('wrap') ? params.get('wrap') === 'x' : image.width >= 3 * image.height;
    $('wrap').setAttribute('aria-pressed', String(viewer.wrap));
    if (Number.isFinite(x) && Number.isFinite(y) && Number.isFinite(z) && z > 0) {
      viewer.cx = x; viewer.cy = y; viewer.scale = z;
      viewChanged();
    } else {
      fit();
    }
    stage.focus({ preventScroll: true });
  }

  function neighbour(step) {
    if (!viewer.image) return;
    const i = album.images.findIndex((im) => im.id === viewer.image.id);
    const next = album.images[i + step];
    if (i >= 0 && next) { album.current = i + step; location.hash = imageHash(next.id); }
  }

  // Pointer input: drag with one pointer, pinch with two, double-tap to zoom.
  const pointers = new Map();
  let pinch = null;
  let lastTap = null;
  let lastPointerType = 'mouse';
  stage.addEventListener('pointerdown', (e) => {
    if (!viewer.image) return;
    lastPointerType = e.pointerType;
    stage.setPointerCapture(e.pointerId);
    pointers.set(e.pointerId, { x: e.clientX, y: e.clientY, startX: e.clientX, startY: e.clientY, time: e.timeStamp });
    stage.classList.add('dragging');
    if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      pinch = { distance: Math.hypot(a.x - b.x, a.y - b.y) || 1 };
    }
  });
  stage.addEventListener('pointermove', (e) => {
    const p = pointers.get(e.pointerId);
    if (!p) return;
    const dx = e.clientX - p.x, dy = e.clientY - p.y;
    p.x = e.clientX; p.y = e.clientY;
    if (pointers.size === 1) {
      panBy(-dx, -dy);
    } else if (pointers.size === 2 && pinch) {
      const [a, b] = [...pointers.values()];
      const distance = Math.hypot(a.x - b.x, a.y - b.y) || 1;
      const rect = stage.getBoundingClientRect();
      panBy(-dx / 2, -dy / 2);
      zoomAt((a.x + b.x) / 2 - rect.left, (a.y + b.y) / 2 - rect.top, distance / pinch.distance);
      pinch.distance = distance;
    }
  });
  const pointerEnd = (e) => {
    const p = pointers.get(e.pointerId);
    if (!p) return;
    pointers.delete(e.pointerId);
    if (pointers.size < 2) pinch = null;
    if (pointers.size === 0) stage.classList.remove('dragging');
    // A short touch that did not move is a tap; two close in time and place zoom in.
    if (e.type === 'pointerup' && e.pointerType !== 'mouse' &&
        Math.hypot(e.clientX - p.startX, e.clientY - p.startY) < 10 && e.timeStamp - p.time < 300) {
      const rect = stage.getBoundingClientRect();
      const tap = { x: e.clientX - rect.left, y: e.clientY - rect.top, time: e.timeStamp };
      if (lastTap && tap.time - lastTap.time < 350 && Math.hypot(tap.x - lastTap.x, tap.y - lastTap.y) < 40) {
        zoomAt(tap.x, tap.y, 2);
        lastTap = null;
      } else {
        lastTap = tap;
      }
    }
  };
  stage.addEventListener('pointerup', pointerEnd);
  stage.addEventListener('pointercancel', pointerEnd);
  stage.addEventListener('dblclick', (e) => {
    if (!viewer.image || lastPointerType !== 'mouse') return;
    const rect = stage.getBoundingClientRect();
    zoomAt(e.clientX - rect.left, e.clientY - rect.top, e.shiftKey ? 0.5 : 2);
  });
  stage.addEventListener('wheel', (e) => {
    if (!viewer.image) return;
    e.preventDefault();
    const rect = stage.getBoundingClientRect();
    const unit = e.deltaMode === 1 ? 0.05 : e.deltaMode === 2 ? 1 : 0.0015;
    // Trackpad pinches arrive as wheel events with ctrlKey: zoom faster for them.
    const factor = Math.exp(-e.deltaY * unit * (e.ctrlKey ? 4 : 1));
    zoomAt(e.clientX - rect.left, e.clientY - rect.top, factor);
  }, { passive: false });

  document.addEventListener('keydown', (e) => {
    if ($('viewer').hidden || !viewer.image || e.altKey || e.metaKey || e.ctrlKey) return;
    if (e.target instanceof HTMLButtonElement && (e.key === 'Enter' || e.key === ' ')) return;
    const { w, h } = stageSize();
    const step = e.shiftKey ? 0.5 : 0.1;
    const actions = {
      '+': () => zoomCentre(1.5), '=': () => zoomCentre(1.5),
      '-': () => zoomCentre(1 / 1.5), '_': () => zoomCentre(1 / 1.5), '−': () => zoomCentre(1 / 1.5),
      '0': fit,
      ArrowLeft: () => panBy(-w * step, 0), ArrowRight: () => panBy(w * step, 0),
      ArrowUp: () => panBy(0, -h * step), ArrowDown: () => panBy(0, h * step),
      Escape: () => { location.hash = '#/'; },
      PageUp: () => neighbour(-1), PageDown: () => neighbour(1),
    };
    const action = actions[e.key];
    if (action) { e.preventDefault(); action(); }
  });

  $('zoom-in').addEventListener('click', () => zoomCentre(2));
  $('zoom-out').addEventListener('click', () => zoomCentre(0.5));
  $('zoom-fit').addEventListener('click', () => fit());
  $('wrap').addEventListener('click', () => {
    viewer.wrap = !viewer.wrap;
    $('wrap').setAttribute('aria-pressed', String(viewer.wrap));
    clearViewer();
    viewChanged();
    writeHash();
  });
  $('prev-image').addEventListener('click', () => neighbour(-1));
  $('next-image').addEventListener('click', () => neighbour(1));
  new ResizeObserver(() => { if (viewer.image && !$('viewer').hidden) viewChanged(); }).observe(stage);

  // ---------------------------------------------------------------- routing
  function showAlbum() {
    clearViewer();
    viewer.image = null;
    document.title = 'tiler';
    $('viewer').hidden = true;
    $('album').hidden = false;
    status(album.total === null ? '' : `${album.total} image${album.total === 1 ? '' : 's'}`);
    const ready = album.total === null ? loadMoreImages() : Promise.resolve();
    ready.then(() => {
      status(`${album.total ?? 0} image${album.total === 1 ? '' : 's'}`);
      requestAnimationFrame(() => goToCard(album.current, false));
    });
  }

  function route() {
    const hash = location.hash || '#/';
    const match = /^#\/image\/([^?]+)(?:\?(.*))?$/.exec(hash);
    if (match) {
      let id;
      try { id = decodeURIComponent(match[1]); } catch (_) { id = match[1]; }
      openImage(id, new URLSearchParams(match[2] || ''));
      if (album.total === null) loadMoreImages();
    } else {
      showAlbum();
    }
  }
  addEventListener('hashchange', route);
  route();

  /** For tests and the console: counters and the current view. */
  window.tilerViewer = {
    stats,
    view: () => viewer.image && {
      id: viewer.image.id, x: viewer.cx, y: viewer.cy, scale: viewer.scale, level: viewer.level, wrap: viewer.wrap,
      activeTiles: viewer.active.size, pooled: viewer.pool.length,
      // Tiles of the current level still loading, and where the placed tiles start.
      pending: [...viewer.active.values()].filter((e) => e.level === viewer.level && !e.loaded).length,
      tileXs: [...viewer.active.values()].map((e) => e.tile.x),
    },
    album: () => ({ loaded: album.images.length, total: album.total, current: album.current }),
    zoomBy: zoomCentre,
    panBy,
    goToCard,
  };
})();
"""#
}
