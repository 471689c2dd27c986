// tiler's viewer: an album of every pyramid and a deep-zoom view of one.
//
// One file by design, longer than the 600 lines the Swift sources keep to: the server
// embeds it in the binary and sends it as is, with no bundler or module loader between,
// so that the page needs one request for its script and works from any path prefix.
//
// Every URL the page asks for is relative to the page (or to the <base> the server
// writes for --base-url), so the viewer works under any path prefix: api('images')
// is BASE/images. The links the server hands back (thumbnails, tiles) are absolute with
// --base-url and used as given; without it they are root-relative (/images/…), which
// would leave a proxy's prefix, so they are taken relative to the page as well (here()).
//
// Album (#/): a grid of thumbnails that stays quick at any count. The listing is
// fetched a page of /images at a time, only for the rows near the screen; only those
// rows have elements, and cells leaving the screen are reused for the ones coming in
// (the tiled scroll view's dequeueReusableTile). The chosen image is kept in a page
// control of fixed size: "37 / 1000" and a scrubber.
//
// Deep zoom (#/image/ID?x=&y=&z=[&wrap=x]): x, y are the image pixel at the centre of the
// window and z the scale (screen pixels per image pixel). The thumbnail is shown at once,
// stretched over the whole image on a checkerboard (for transparent pixels); the
// server's /images/ID/visible answers which tiles the viewport needs (nearest first,
// one ring of margin), and tiles are placed at the x, y, width, height it returns. Tile
// elements leaving the screen go back to a pool and are reused for the next tiles.
// wrap=x repeats the image sideways without end (panoramas). A navigator shows where
// the view is; a swipe at the fitted size, Page Up/Down or the arrows go to the
// neighbouring images, as in a photo album.
//
// Signing in: a private image this browser may not see yet is offered the site's login,
// as the IIIF Authorization Flow 2.0 says (https://iiif.io/api/auth/2.0/), when its
// info.json names an access service of profile `active` (the policy's loginURL).
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  /**
   * The access token of a share link (`/?token=…#/image/ID`), carried into every URL the
   * viewer makes, so that private images open for whoever holds the link.
   */
  const token = new URLSearchParams(location.search).get('token');
  const withToken = (url) => {
    if (token && url.origin === new URL(document.baseURI).origin) url.searchParams.set('token', token);
    return url.href;
  };
  /** A URL of the server's API, relative to the page (or the server's <base>). */
  const api = (path) => withToken(new URL(path, document.baseURI));
  /**
   * A link from the server's documents, as this page should ask for it: a root-relative
   * one (/images/a/tiles/…, written by a server without --base-url, which cannot know a
   * proxy's prefix) relative to the page, so that it keeps the prefix the page was
   * reached under; an absolute one as given.
   */
  const here = (link) => (link.startsWith('/') && !link.startsWith('//') ? api(link.slice(1)) : withToken(new URL(link)));
  /** An image of /images with its thumbnail's link made `here`. */
  const located = (image) => ({ ...image, thumbnail: { ...image.thumbnail, url: here(image.thumbnail.url) } });
  const stats = {
    thumbnailsLoaded: 0, tilesRequested: 0, tilesLoaded: 0, tileErrors: 0, tileRetries: 0, visibleRetries: 0,
    tileElementsCreated: 0, tileElementsReused: 0, visibleRequests: 0, levelsLoaded: [],
    listingPagesLoaded: 0, cellsCreated: 0, cellsReused: 0, loginsOffered: 0, logins: 0,
  };
  const levelsLoaded = new Set();
  const status = (text) => { $('status').textContent = text; };
  /** What a person calls an image: its title (the photo's own, from /images), else its id. */
  const titleOf = (image) => image.title || image.id;
  /**
   * The most the view magnifies, in screen pixels per image pixel: `tiler serve
   * --viewer-max-zoom` (a percentage, 200 by default; past about twice a photo only blurs),
   * written into the page by the server. Never less than what fits the window.
   */
  const maxZoom = (() => {
    const percent = parseFloat(document.querySelector('meta[name="tiler-max-zoom"]')?.content);
    return Number.isFinite(percent) && percent >= 100 ? percent / 100 : 2;
  })();
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

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

  function imageHash(id, params) {
    return '#/image/' + encodeURIComponent(id) + (params ? '?' + params : '');
  }

  // ---------------------------------------------------------------- the listing
  // /images a page at a time, kept sparse: items[i] is the i-th image of the listing
  // once its page has arrived. If the total changes (pyramids cut or removed meanwhile), the pages
  // known so far are dropped and fetched again as they are needed.
  const listing = { total: null, items: [], pageSize: 100, pages: new Map(), album: null };
  /** The listing's query: every image, or one album's (`#/album/NAME`). */
  const listingQuery = () => (listing.album === null ? '' : '&album=' + encodeURIComponent(listing.album));
  /** Shows one album's images (or every image, for null): the listing starts again. */
  function chooseAlbum(name) {
    if (listing.album === name) return;
    listing.album = name;
    listing.total = null;
    listing.items = [];
    listing.pages = new Map();
    album.current = 0;
    grid.scrollTop = 0;
  }

  function loadPage(page) {
    const known = listing.pages.get(page);
    if (known) return known;
    const promise = getJSON(api(`images?offset=${page * listing.pageSize}&limit=${listing.pageSize}${listingQuery()}`)).then((answer) => {
      remember(answer, page, promise);
      return answer;
    }, (error) => {
      listing.pages.delete(page);
      throw error;
    });
    listing.pages.set(page, promise);
    return promise;
  }

  /** Keeps a page of /images (fetched as `promise`, or found by `find=`). */
  function remember(answer, page, promise) {
    if (listing.total !== null && listing.total !== answer.total) {
      listing.items = [];
      listing.pages = new Map();
    }
    if (!listing.pages.has(page)) listing.pages.set(page, promise || Promise.resolve(answer));
    listing.total = answer.total;
    answer.images.forEach((image, k) => { listing.items[answer.offset + k] = located(image); });
    stats.listingPagesLoaded++;
    listingChanged();
  }

  /** The i-th image, fetching its page if need be; undefined past the end. */
  async function itemAt(i) {
    if (!listing.items[i]) await loadPage(Math.floor(i / listing.pageSize));
    return listing.items[i];
  }

  /**
   * The index of image `id` in the listing, or -1. The server knows the order (natural
   * order of titles, else ids): /images?find=ID answers the page that holds it.
   */
  async function indexOf(id) {
    const known = listing.items.findIndex((image) => image && image.id === id);
    if (known >= 0) return known;
    let answer;
    try {
      answer = await getJSON(api(`images?find=${encodeURIComponent(id)}&limit=${listing.pageSize}${listingQuery()}`));
    } catch (e) {
      if (e.status === 404) return -1;
      throw e;
    }
    remember(answer, Math.floor(answer.offset / listing.pageSize));
    const k = answer.images.findIndex((image) => image.id === id);
    return k < 0 ? -1 : answer.offset + k;
  }

  function listingChanged() {
    $('album-empty').hidden = listing.total !== 0;
    if (!$('album').hidden) {
      status(`${listing.total} image${listing.total === 1 ? '' : 's'}`);
      layoutGrid();
    }
    updatePager();
    updatePosition();
  }

  // ---------------------------------------------------------------- album
  const grid = $('grid');
  const space = $('grid-space');
  const scrubber = $('scrubber');
  const album = {
    current: 0,
    columns: 1, cellWidth: 200, cellHeight: 180,
    cells: new Map(),   // index → element, for the rows near the screen
    pool: [],           // detached cells ready for reuse
  };
  const cellMinimum = 180, cellPadding = 6, captionHeight = 24;

  /** Columns and cell size from the grid's width; the space holds every row. */
  function layoutGrid() {
    const width = grid.clientWidth || 1;
    album.columns = Math.max(1, Math.floor(width / cellMinimum));
    album.cellWidth = width / album.columns;
    album.cellHeight = Math.round((album.cellWidth - 2 * cellPadding) * 0.75) + 2 * cellPadding + captionHeight;
    const rows = Math.ceil((listing.total || 0) / album.columns);
    space.style.height = rows * album.cellHeight + 'px';
    for (const [i, el] of album.cells) placeCell(el, i);
    renderGrid();
  }

  /** Makes cells for the rows on screen (and one more each way), reusing the others. */
  function renderGrid() {
    const total = listing.total || 0;
    const { columns, cellHeight } = album;
    const top = grid.scrollTop, height = grid.clientHeight;
    const firstRow = Math.max(0, Math.floor(top / cellHeight) - 1);
    const lastRow = Math.floor((top + height) / cellHeight) + 1;
    const first = firstRow * columns, last = Math.min(total - 1, (lastRow + 1) * columns - 1);
    for (const [i, el] of album.cells) {
      if (i < first || i > last) { album.cells.delete(i); enqueueCell(el); }
    }
    const fragment = document.createDocumentFragment();
    const missing = new Set();
    for (let i = first; i <= last; i++) {
      let el = album.cells.get(i);
      if (!el) {
        el = dequeueCell();
        album.cells.set(i, el);
        placeCell(el, i);
        fragment.append(el);
      }
      fillCell(el, i);
      if (!listing.items[i]) missing.add(Math.floor(i / listing.pageSize));
    }
    space.append(fragment);
    for (const page of missing) loadPage(page).catch((e) => status('Could not list the images: ' + e.message));
    grid.setAttribute('aria-activedescendant', album.cells.has(album.current) ? 'cell-' + album.current : '');
  }

  function dequeueCell() {
    let el = album.pool.pop();
    if (el) { stats.cellsReused++; return el; }
    el = document.createElement('a');
    el.className = 'cell';
    el.setAttribute('role', 'option');
    const thumb = document.createElement('div');
    thumb.className = 'thumb';
    const img = document.createElement('img');
    img.alt = '';
    img.decoding = 'async';
    img.draggable = false;
    img.addEventListener('load', () => {
      if (!img.getAttribute('src')) return;
      img.classList.add('loaded');
      stats.thumbnailsLoaded++;
    });
    img.addEventListener('error', () => { if (img.getAttribute('src')) img.alt = (el.dataset.id || '') + ' (thumbnail missing)'; });
    thumb.append(img);
    const name = document.createElement('span');
    name.className = 'name';
    el.append(thumb, name);
    stats.cellsCreated++;
    return el;
  }

  function enqueueCell(el) {
    el.remove();
    const img = el.querySelector('img');
    img.removeAttribute('src');
    img.classList.remove('loaded');
    img.alt = '';
    delete el.dataset.id;
    el.removeAttribute('href');
    album.pool.push(el);
  }

  function placeCell(el, i) {
    const column = i % album.columns, row = Math.floor(i / album.columns);
    el.id = 'cell-' + i;
    el.dataset.index = String(i);
    el.style.transform = `translate(${column * album.cellWidth}px, ${row * album.cellHeight}px)`;
    el.style.width = album.cellWidth + 'px';
    el.style.height = album.cellHeight + 'px';
  }

  /** Shows image i in its cell: the thumbnail fitted to the box, the name, the link. */
  function fillCell(el, i) {
    const image = listing.items[i];
    const current = i === album.current;
    el.classList.toggle('current', current);
    el.setAttribute('aria-selected', String(current));
    const img = el.firstChild.firstChild, name = el.lastChild;
    if (!image) {
      if (el.dataset.id) { delete el.dataset.id; img.removeAttribute('src'); img.classList.remove('loaded'); }
      el.removeAttribute('href');
      el.removeAttribute('title');
      name.textContent = '';
      return;
    }
    const boxWidth = album.cellWidth - 2 * cellPadding, boxHeight = album.cellHeight - 2 * cellPadding - captionHeight;
    const s = Math.min(boxWidth / image.thumbnail.width, boxHeight / image.thumbnail.height);
    const w = Math.max(1, Math.round(image.thumbnail.width * s)), h = Math.max(1, Math.round(image.thumbnail.height * s));
    img.style.left = Math.round((boxWidth - w) / 2) + 'px';
    img.style.top = Math.round((boxHeight - h) / 2) + 'px';
    img.style.width = w + 'px';
    img.style.height = h + 'px';
    if (el.dataset.id === image.id) return;
    el.dataset.id = image.id;
    el.href = imageHash(image.id);
    el.setAttribute('aria-label', `${titleOf(image)}, ${image.width} by ${image.height} pixels`);
    el.title = titleOf(image);  // in full on hover: the caption is cut to one line
    name.textContent = titleOf(image);
    img.classList.remove('loaded');
    img.alt = titleOf(image);
    img.src = image.thumbnail.url;
  }

  /** Chooses image `index`: the page control follows, and the grid scrolls to it. */
  function select(index, { scroll = true } = {}) {
    const total = listing.total || 0;
    if (!total) return;
    album.current = clamp(Math.round(index), 0, total - 1);
    if (scroll) scrollToCell(album.current);
    renderGrid();
    updatePager();
  }

  function scrollToCell(i) {
    const top = Math.floor(i / album.columns) * album.cellHeight, bottom = top + album.cellHeight;
    if (top < grid.scrollTop) grid.scrollTop = top;
    else if (bottom > grid.scrollTop + grid.clientHeight) grid.scrollTop = bottom - grid.clientHeight;
  }

  function updatePager() {
    const total = listing.total || 0;
    $('page-number').textContent = total ? `${album.current + 1} / ${total}` : '';
    scrubber.max = String(Math.max(1, total));
    scrubber.value = String(album.current + 1);
    scrubber.disabled = total <= 1;
    scrubber.setAttribute('aria-valuetext', total ? `image ${album.current + 1} of ${total}` : 'no images');
    $('album-prev').disabled = album.current <= 0;
    $('album-next').disabled = album.current >= total - 1;
  }

  async function openCurrent() {
    const image = await itemAt(album.current);
    if (image) location.hash = imageHash(image.id);
  }

  let gridFrame = 0;
  grid.addEventListener('scroll', () => {
    if (gridFrame) return;
    gridFrame = requestAnimationFrame(() => {
      gridFrame = 0;
      renderGrid();
      // Scrolled away from the chosen image (a swipe, the wheel, the scroll bar): the
      // page control follows to the nearest image on screen, as a page control follows
      // a carousel.
      const total = listing.total || 0;
      if (!total) return;
      const row = Math.floor(album.current / album.columns);
      const firstRow = Math.ceil(grid.scrollTop / album.cellHeight);
      const lastRow = Math.max(firstRow, Math.floor((grid.scrollTop + grid.clientHeight) / album.cellHeight) - 1);
      if (row < firstRow || row > lastRow) {
        const column = album.current % album.columns;
        select(clamp(clamp(row, firstRow, lastRow) * album.columns + column, 0, total - 1), { scroll: false });
      }
    });
  }, { passive: true });

  grid.addEventListener('keydown', (e) => {
    if (e.altKey || e.metaKey || e.ctrlKey) return;
    const total = listing.total || 0;
    const rowsOnScreen = Math.max(1, Math.floor(grid.clientHeight / album.cellHeight));
    const moves = {
      ArrowLeft: -1, ArrowRight: 1, ArrowUp: -album.columns, ArrowDown: album.columns,
      PageUp: -album.columns * rowsOnScreen, PageDown: album.columns * rowsOnScreen,
    };
    if (e.key in moves) {
      e.preventDefault();
      const step = moves[e.key];
      // Up and down stay in the column unless there is no row that way.
      const next = album.current + step;
      if (Math.abs(step) >= album.columns && (next < 0 || next >= total)) select(step < 0 ? 0 : total - 1);
      else select(next);
    } else if (e.key === 'Home') { e.preventDefault(); select(0); }
    else if (e.key === 'End') { e.preventDefault(); select(total - 1); }
    else if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); openCurrent(); }
  });
  grid.addEventListener('click', (e) => {
    const cell = e.target.closest('.cell');
    if (cell && cell.dataset.index) {
      album.current = Number(cell.dataset.index);
      updatePager();
    }
  });
  scrubber.addEventListener('input', () => select(Number(scrubber.value) - 1));
  $('album-prev').addEventListener('click', () => select(album.current - 1));
  $('album-next').addEventListener('click', () => select(album.current + 1));
  new ResizeObserver(() => { if (!$('album').hidden) { layoutGrid(); scrollToCell(album.current); } }).observe(grid);

  const stage = $('stage');
  const plane = $('plane');
  const dpr = () => window.devicePixelRatio || 1;

  const viewer = {
    image: null,          // { id, width, height, tileSize, maxLevel, padded, thumbnail }
    cx: 0, cy: 0, scale: 1, wrap: false,
    active: new Map(),    // key → { el, tile, level, loaded, failed, retries, retryTimer }
    pool: [],             // detached <img> elements ready for reuse
    backdrops: [],        // thumbnail copies, one per repetition on screen
    level: null,          // level of the last visible answer
    request: null,        // AbortController of the visible request in flight
    dirty: false,
    sequence: 0,
    visibleRetries: 0,    // failed /visible requests in a row
    visibleRetryTimer: 0,
    hashTimer: 0,
    index: null,          // the image's place in the listing, once known
  };

  const stageSize = () => ({ w: stage.clientWidth || 1, h: stage.clientHeight || 1 });
  function fitScale() {
    const { w, h } = stageSize();
    const im = viewer.image;
    return Math.min(w / im.width, h / im.height) * 0.95;
  }
  function scaleLimits() {
    const fit = fitScale();
    return { min: Math.min(fit / 2, 1), max: Math.max(maxZoom, fit) };
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
    renderNavigator(v);
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

  /**
   * Keeps the address on the current view. Only an address that still names the current
   * image is rewritten: one the user (or a link, or the back button) has just changed is
   * a navigation whose hashchange may not have run yet, and must not be undone.
   */
  function writeHash() {
    if (!viewer.image) return;
    const current = parseHash(location.hash);
    if (!current || current.id !== viewer.image.id) return;
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
    clearTimeout(viewer.visibleRetryTimer);
    getJSON(api(`images/${encodeURIComponent(im.id)}/visible?${query}`), controller.signal)
      .then((answer) => {
        if (viewer.visibleRetries > 0 && viewer.image === im) status(`${im.id} · ${im.width} × ${im.height}`);
        viewer.visibleRetries = 0;
        if (sequence === viewer.sequence && viewer.image === im) showTiles(answer);
      })
      .catch((e) => {
        if (isAbort(e)) return;
        status('Could not list tiles: ' + e.message);
        // The network or a busy server (no status, 429, 5xx): ask again, 0.5 s, 1 s, 2 s
        // and then every 4 s, while the view stays on this image. A 4xx stays an error.
        const transient = e.status === undefined || e.status === 429 || e.status >= 500;
        if (!transient || viewer.image !== im) return;
        const delay = Math.min(4000, 500 * 2 ** viewer.visibleRetries++);
        stats.visibleRetries++;
        viewer.visibleRetryTimer = setTimeout(() => { if (viewer.image === im) requestVisible(); }, delay);
      })
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
      el.addEventListener('error', () => tileFailed(el));
      stats.tileElementsCreated++;
    }
    return el;
  }

  function enqueueTile(entry) {
    clearTimeout(entry.retryTimer);
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

  /**
   * A tile that failed (the server busy, its storage away for a moment: a 503 says to
   * come back) is asked for again after 0.5, 1, 2, 4 and 8 s while it stays on screen;
   * after that it counts as an error and no longer holds the previous level underneath.
   */
  const tileRetryDelays = [500, 1000, 2000, 4000, 8000];
  function tileFailed(el) {
    const key = el.dataset.key;
    const entry = key && viewer.active.get(key);
    if (!entry || entry.el !== el) return;
    const retries = entry.retries || 0;
    if (retries < tileRetryDelays.length) {
      entry.retries = retries + 1;
      stats.tileRetries++;
      entry.retryTimer = setTimeout(() => {
        if (viewer.active.get(key) === entry) el.src = entry.tile.url;
      }, tileRetryDelays[retries]);
      return;
    }
    entry.failed = true;
    stats.tileErrors++;
    retireIfCovered();
  }

  /** Tiles of the previous level stay underneath until the new level has loaded. */
  function retireIfCovered() {
    let waiting = false;
    for (const e of viewer.active.values()) if (e.level === viewer.level && !e.loaded && !e.failed) { waiting = true; break; }
    if (waiting) return;
    for (const [key, e] of viewer.active) {
      if (e.level !== viewer.level) { viewer.active.delete(key); enqueueTile(e); }
    }
  }

  function showTiles(answer) {
    viewer.level = answer.level;
    const wanted = new Map(answer.tiles.map((t) => [tileKey(t), { ...t, url: here(t.url) }]));
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
      viewer.active.set(key, { el, tile, key, level: tile.level, loaded: false, failed: false, retries: 0, retryTimer: 0 });
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
    clearTimeout(viewer.hashTimer);
    for (const entry of viewer.active.values()) enqueueTile(entry);
    viewer.active.clear();
    viewer.backdrops.forEach((b) => b.remove());
    viewer.backdrops = [];
    viewer.level = null;
    if (viewer.request) viewer.request.abort();
    viewer.request = null;
    clearTimeout(viewer.visibleRetryTimer);
    viewer.visibleRetries = 0;
    viewer.sequence++;
  }

  async function openImage(id, params) {
    // Back (☰, Esc) to the album this image was opened from.
    $('back').href = listing.album === null ? '#/' : '#/album/' + encodeURIComponent(listing.album);
    $('album').hidden = true;
    $('viewer').hidden = false;
    let image = listing.items.find((im) => im && im.id === id);
    if (!viewer.image || viewer.image.id !== id) {
      hideLogin();
      clearViewer();
      viewer.image = null;
      viewer.index = null;
      // Nothing of the last image stays while this one opens, or if it cannot.
      forgetImage();
      status(`Opening ${id}…`);
      try {
        if (!image) image = located(await getJSON(api('images/' + encodeURIComponent(id))));
      } catch (e) {
        if (e.status === 401 && await offerLogin(id)) return;
        status(e.status === 404 ? `There is no image named “${id}”.` : 'Could not open the image: ' + e.message);
        return;
      }
      viewer.image = image;
      document.title = `${titleOf(image)} · tiler`;
      showNavigatorImage(image);
      navigator.hidden = false;
      const download = $('download');
      download.href = api('iiif/3/' + encodeURIComponent(image.id) + '/full/max/0/default.jpg');
      download.setAttribute('download', image.id.replace(/[^\w.-]+/g, '_') + '.jpg');
      download.hidden = false;
      if (!$('details').hidden) fillDetails();
      indexOf(image.id).then((i) => {
        if (viewer.image !== image || i < 0) return;
        viewer.index = i;
        album.current = i;
        updatePosition();
      }).catch((e) => status('Could not list the images: ' + e.message));
    }
    status(`${titleOf(image)} · ${image.width} × ${image.height}`);
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

  /**
   * Opens the previous (-1) or next (+1) image of the listing; with `around`, the last's
   * next is the first (the slideshow).
   */
  async function neighbour(step, { around = false } = {}) {
    const image = viewer.image;
    if (!image) return;
    const i = viewer.index ?? await indexOf(image.id);
    const j = around && listing.total ? (((i + step) % listing.total) + listing.total) % listing.total : i + step;
    if (i < 0 || j < 0 || j >= listing.total || j === i) return;
    const next = await itemAt(j);
    if (!next || viewer.image !== image) return;
    album.current = j;
    location.hash = imageHash(next.id);
  }

  function updatePosition() {
    const known = viewer.image && viewer.index !== null && listing.total;
    $('viewer-position').textContent = known ? `${viewer.index + 1} / ${listing.total}` : '';
    $('prev-image').disabled = !known || viewer.index <= 0;
    $('next-image').disabled = !known || viewer.index >= listing.total - 1;
  }

  /** Empties what shows the open image: navigator, position, title, download, details. */
  function forgetImage() {
    navigatorImage.removeAttribute('src');
    navigator.hidden = true;
    updatePosition();
    document.title = 'tiler';
    const download = $('download');
    download.removeAttribute('href');
    download.hidden = true;
    $('details-title').textContent = '';
    $('details-description').textContent = '';
    $('details-list').replaceChildren();
  }

  // About this image: its title, caption and what the photo says of itself (the
  // `metadata` of /images/ID), with its size and id.
  function toggleDetails(show = $('details').hidden) {
    $('details').hidden = !show;
    $('details-button').setAttribute('aria-pressed', String(show));
    if (show) fillDetails();
  }
  async function fillDetails() {
    const image = viewer.image;
    if (!image) return;
    let about = image;
    if (!image.metadata) {
      try { about = await getJSON(api('images/' + encodeURIComponent(image.id))); } catch (_) { /* what the listing says */ }
    }
    if (viewer.image !== image) return;
    const m = about.metadata || {};
    $('details-title').textContent = m.title || titleOf(about);
    $('details-description').textContent = m.description || '';
    const place = m.location && Number.isFinite(m.location.lat) && Number.isFinite(m.location.lon)
      ? `${m.location.lat.toFixed(5)}, ${m.location.lon.toFixed(5)}` : '';
    const rows = [
      ['Taken', m.dateTaken], ['By', m.creator], ['Rights', m.copyright], ['Camera', m.camera], ['Lens', m.lens],
      ['Exposure', m.exposure], ['Album', m.album], ['Location', place],
      ['Size', `${image.width} × ${image.height} pixels`], ['Id', image.id],
    ];
    $('details-list').replaceChildren(...rows.filter(([, v]) => typeof v === 'string' && v).flatMap(([k, v]) => {
      const dt = document.createElement('dt'), dd = document.createElement('dd');
      dt.textContent = k;
      dd.textContent = v;
      return [dt, dd];
    }));
  }

  // The keys, listed by ? (and closed by ? or Esc).
  function toggleHelp(show = $('help').hidden) {
    $('help').hidden = !show;
    if (!show) stage.focus({ preventScroll: true });
  }

  // The slideshow: the next image (after the last, the first) every few seconds, until a
  // key, a touch or a click stops it.
  const slideshow = { timer: 0, seconds: 5 };
  function startSlideshow(seconds = slideshow.seconds) {
    stopSlideshow();
    if (!viewer.image) return;
    slideshow.timer = setInterval(() => {
      if (!viewer.image || $('viewer').hidden) stopSlideshow();
      else neighbour(1, { around: true });
    }, seconds * 1000);
    $('slideshow').setAttribute('aria-pressed', 'true');
    status(`Slideshow: a new image every ${seconds} s; any key stops it`);
  }
  function stopSlideshow() {
    if (!slideshow.timer) return;
    clearInterval(slideshow.timer);
    slideshow.timer = 0;
    $('slideshow').setAttribute('aria-pressed', 'false');
  }
  const toggleSlideshow = () => (slideshow.timer ? stopSlideshow() : startSlideshow());

  /** Copies a link to this view (with the page's share token, if it has one). */
  async function share() {
    writeHash();
    const link = location.href;
    $('share').dataset.link = link;
    try {
      await window.navigator.clipboard.writeText(link);  // (`navigator` here is the overview)
      status('Link copied');
    } catch (_) {
      status('Copy this link: ' + link);
    }
  }

  // The navigator: the thumbnail fitted in 160 × 120 (96 × 72 on small screens) and a
  // rectangle for the viewport; pressing or dragging on it centres the view there.
  const navigator = $('navigator'), navigatorImage = $('navigator-image'), navigatorView = $('navigator-view');
  function showNavigatorImage(image) {
    const small = matchMedia('(max-width: 700px)').matches;
    const s = Math.min((small ? 96 : 160) / image.width, (small ? 72 : 120) / image.height);
    navigatorImage.style.width = Math.max(1, Math.round(image.width * s)) + 'px';
    navigatorImage.style.height = Math.max(1, Math.round(image.height * s)) + 'px';
    navigatorImage.src = image.thumbnail.url;
  }
  function renderNavigator(v) {
    const im = viewer.image;
    const w = navigatorImage.offsetWidth, h = navigatorImage.offsetHeight;
    if (!w || !h) return;
    let x0 = v.x, x1 = v.x + v.width;
    if (viewer.wrap) {
      const k = Math.floor(viewer.cx / im.width) * im.width;
      x0 -= k; x1 -= k;
    }
    const sx = w / im.width, sy = h / im.height;
    const left = clamp(x0, 0, im.width) * sx, right = clamp(x1, 0, im.width) * sx;
    const top = clamp(v.y, 0, im.height) * sy, bottom = clamp(v.y + v.height, 0, im.height) * sy;
    navigatorView.style.transform = `translate(${navigatorImage.offsetLeft + left}px, ${navigatorImage.offsetTop + top}px)`;
    navigatorView.style.width = Math.max(2, right - left) + 'px';
    navigatorView.style.height = Math.max(2, bottom - top) + 'px';
  }
  function centreFromNavigator(e) {
    const im = viewer.image;
    if (!im) return;
    const rect = navigatorImage.getBoundingClientRect();
    viewer.cx = clamp((e.clientX - rect.left) / rect.width, 0, 1) * im.width;
    viewer.cy = clamp((e.clientY - rect.top) / rect.height, 0, 1) * im.height;
    viewChanged();
  }
  navigator.addEventListener('pointerdown', (e) => {
    navigator.setPointerCapture(e.pointerId);
    centreFromNavigator(e);
  });
  navigator.addEventListener('pointermove', (e) => { if (navigator.hasPointerCapture(e.pointerId)) centreFromNavigator(e); });

  // Full screen: the viewer alone, with its controls.
  const fullscreenButton = $('fullscreen');
  fullscreenButton.hidden = !document.fullscreenEnabled;
  function toggleFullscreen() {
    if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
    else $('viewer').requestFullscreen().catch((e) => status('Full screen is not available here: ' + e.message));
  }
  document.addEventListener('fullscreenchange', () => {
    fullscreenButton.setAttribute('aria-pressed', String(Boolean(document.fullscreenElement)));
    stage.focus({ preventScroll: true });
  });

  // Pointer input: drag with one pointer, pinch with two, double-tap to zoom.
  const pointers = new Map();
  let pinch = null;
  let swipe = null;
  let lastTap = null;
  let lastPointerType = 'mouse';
  stage.addEventListener('pointerdown', (e) => {
    stopSlideshow();
    if (!viewer.image) return;
    lastPointerType = e.pointerType;
    stage.setPointerCapture(e.pointerId);
    pointers.set(e.pointerId, { x: e.clientX, y: e.clientY, startX: e.clientX, startY: e.clientY, time: e.timeStamp });
    stage.classList.add('dragging');
    // A swipe to the neighbouring image is one touch at the fitted size (or smaller).
    if (pointers.size === 1) swipe = { fitted: viewer.scale <= fitScale() * 1.02 && !viewer.wrap };
    else swipe = null;
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
    const dx = e.clientX - p.startX, dy = e.clientY - p.startY;
    if (e.type === 'pointerup' && e.pointerType !== 'mouse' && swipe && swipe.fitted && pointers.size === 0 &&
        Math.abs(dx) > Math.min(80, stageSize().w / 5) && Math.abs(dx) > 2 * Math.abs(dy)) {
      swipe = null;
      neighbour(dx < 0 ? 1 : -1);
      return;
    }
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

  /** Whether the whole image is on screen (not zoomed in, not repeating): then ← and → page. */
  const isFitted = () => viewer.scale <= fitScale() * 1.02 && !viewer.wrap;
  document.addEventListener('keydown', (e) => {
    if ($('viewer').hidden || e.altKey || e.metaKey || e.ctrlKey) return;
    if (e.target instanceof HTMLButtonElement && (e.key === 'Enter' || e.key === ' ')) return;
    if (e.key !== 's' && e.key !== 'S' && e.key !== 'Shift') stopSlideshow();
    if (!$('help').hidden && (e.key === 'Escape' || e.key === '?')) {
      e.preventDefault();
      toggleHelp(false);
      return;
    }
    if (e.key === '?') {
      e.preventDefault();
      toggleHelp(true);
      return;
    }
    if (!viewer.image) {
      if (e.key === 'Escape') location.hash = $('back').getAttribute('href');
      return;
    }
    const { w, h } = stageSize();
    const step = e.shiftKey ? 0.5 : 0.1;
    const actions = {
      '+': () => zoomCentre(1.5), '=': () => zoomCentre(1.5),
      '-': () => zoomCentre(1 / 1.5), '_': () => zoomCentre(1 / 1.5), '−': () => zoomCentre(1 / 1.5),
      '0': fit,
      ArrowLeft: () => (isFitted() ? neighbour(-1) : panBy(-w * step, 0)),
      ArrowRight: () => (isFitted() ? neighbour(1) : panBy(w * step, 0)),
      ArrowUp: () => panBy(0, -h * step), ArrowDown: () => panBy(0, h * step),
      Escape: () => { location.hash = $('back').getAttribute('href'); },
      PageUp: () => neighbour(-1), PageDown: () => neighbour(1),
      f: toggleFullscreen, F: toggleFullscreen,
      i: () => toggleDetails(), I: () => toggleDetails(),
      s: toggleSlideshow, S: toggleSlideshow,
      d: () => $('download').click(), D: () => $('download').click(),
      l: share, L: share,
      w: () => $('wrap').click(), W: () => $('wrap').click(),
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
  $('prev-image').addEventListener('click', () => { stopSlideshow(); neighbour(-1); });
  $('next-image').addEventListener('click', () => { stopSlideshow(); neighbour(1); });
  $('details-button').addEventListener('click', () => toggleDetails());
  $('slideshow').addEventListener('click', toggleSlideshow);
  $('share').addEventListener('click', share);
  $('help-button').addEventListener('click', () => toggleHelp());
  fullscreenButton.addEventListener('click', toggleFullscreen);
  new ResizeObserver(() => { if (viewer.image && !$('viewer').hidden) viewChanged(); }).observe(stage);

  // ---------------------------------------------------------------- signing in
  // IIIF Authorization Flow 2.0 for a private image the browser may not see yet. Its
  // info.json (a 401 that holds the services and nothing of the image) names a probe
  // service, under it an access service and under that a token service. When the probe
  // says 401 and the access service's profile is `active` (the site's login page), its
  // heading, note and button are shown. The button opens the login page in a window (with
  // ?origin=, as the spec asks); once that window has closed, the token service runs in a
  // hidden iframe and posts an access token to this page, the probe is asked again with
  // it, and at 200 the image opens: its requests carry the cookie the login page set.
  // Without an active access service, the image could not be opened, as before.
  const login = { offer: null, messages: 0 };
  /** The first string of a IIIF language map ({"en": ["Sign in"]}), or ''. */
  const firstText = (map) => {
    if (!map || typeof map !== 'object') return '';
    const values = map.en || Object.values(map)[0];
    return Array.isArray(values) && typeof values[0] === 'string' ? values[0] : '';
  };
  const listOf = (value) => (Array.isArray(value) ? value : []);

  /** What to offer for image `id` when its probe says 401: { id, probe, access, token, result }, or null. */
  async function loginOffer(id) {
    const response = await fetch(api(`iiif/3/${encodeURIComponent(id)}/info.json`));
    if (response.status !== 401) return null;
    const info = await response.json();
    const probe = listOf(info.service).find((s) => s.type === 'AuthProbeService2');
    const access = probe && listOf(probe.service).find((s) => s.type === 'AuthAccessService2' && s.profile === 'active');
    const token = access && listOf(access.service).find((s) => s.type === 'AuthAccessTokenService2');
    if (!token || typeof probe.id !== 'string' || typeof access.id !== 'string' || typeof token.id !== 'string') return null;
    // Only a web page is opened as the login (the server's policy allows no other).
    if (!['http:', 'https:'].includes(new URL(access.id, document.baseURI).protocol)) return null;
    const result = await probeImage(probe.id);
    return result.status === 401 ? { id, probe, access, token, result } : null;
  }

  /** The probe's AuthProbeResult2, with the access token when there is one. */
  async function probeImage(url, accessToken) {
    const response = await fetch(url, accessToken ? { headers: { Authorization: 'Bearer ' + accessToken } } : {});
    if (!response.ok) throw new Error(`the image's probe answered ${response.status}`);
    return response.json();
  }

  /** Shows the sign-in for image `id` if it has one; whether it did (or the view moved on). */
  async function offerLogin(id) {
    let offer = null;
    try {
      offer = await loginOffer(id);
    } catch (_) {
      return false;  // no services to offer: the image could not be opened
    }
    if (!offer) return false;
    const target = parseHash(location.hash);
    if (viewer.image || !target || target.id !== id) return true;
    stats.loginsOffered++;
    showLogin(offer);
    return true;
  }

  /** The sign-in panel for `offer`, with `problem`'s heading and note if the last try failed. */
  function showLogin(offer, problem) {
    login.offer = offer;
    const access = offer.access;
    const heading = firstText(problem && problem.heading) || firstText(access.heading) || firstText(access.label);
    $('login-heading').textContent = heading || 'This image is private';
    $('login-note').textContent = firstText(problem && problem.note) || firstText(access.note);
    $('login-button').textContent = firstText(access.confirmLabel) || firstText(access.label) || 'Sign in';
    $('login-button').disabled = false;
    $('login').hidden = false;
    status(firstText(offer.result.heading) || heading || 'This image is private');
  }

  function hideLogin() {
    login.offer = null;
    $('login').hidden = true;
  }

  $('login-button').addEventListener('click', () => {
    const offer = login.offer;
    if (!offer) return;
    const url = new URL(offer.access.id, document.baseURI);
    url.searchParams.set('origin', location.origin);
    // Opened here, in the click, so that no pop-up blocker stops it.
    const opened = window.open(url.href, 'tiler-login');
    if (!opened) {
      status('The sign-in window was blocked: allow pop-ups for this site.');
      return;
    }
    $('login-button').disabled = true;
    status('Signing in…');
    afterLogin(offer, opened).catch((e) => {
      if (login.offer !== offer) return;
      showLogin(offer);
      status('Could not sign in: ' + e.message);
    });
  });

  /** When the login window has closed: the access token, the probe, and the image. */
  async function afterLogin(offer, opened) {
    await new Promise((resolve) => {
      const timer = setInterval(() => { if (opened.closed) { clearInterval(timer); resolve(); } }, 200);
    });
    if (login.offer !== offer) return;  // the view moved on meanwhile
    const message = await accessToken(offer.token.id);
    if (login.offer !== offer) return;
    if (message.type !== 'AuthAccessToken2' || typeof message.accessToken !== 'string') {
      showLogin(offer, message);
      return;
    }
    const result = await probeImage(offer.probe.id, message.accessToken);
    if (login.offer !== offer) return;
    if (result.status !== 200) {
      showLogin(offer, result);
      return;
    }
    hideLogin();
    stats.logins++;
    route();
  }

  /**
   * The token service's message (AuthAccessToken2 or AuthAccessTokenError2): its page in
   * a hidden iframe posts it to this page's origin; only a message from that frame, of
   * the service's origin and with this request's messageId, is taken.
   */
  function accessToken(service) {
    return new Promise((resolve) => {
      const messageId = `tiler-${++login.messages}-${Date.now()}`;
      const url = new URL(service);
      url.searchParams.set('messageId', messageId);
      url.searchParams.set('origin', location.origin);
      const frame = document.createElement('iframe');
      frame.hidden = true;
      frame.title = 'sign-in';
      const done = (message) => {
        removeEventListener('message', receive);
        clearTimeout(timer);
        frame.remove();
        resolve(message);
      };
      const receive = (e) => {
        if (e.source !== frame.contentWindow || e.origin !== url.origin || !e.data || e.data.messageId !== messageId) return;
        done(e.data);
      };
      const timer = setTimeout(() => done({ type: 'AuthAccessTokenError2', heading: { en: ['The sign-in did not answer'] } }), 30000);
      addEventListener('message', receive);
      frame.src = url.href;
      document.body.append(frame);
    });
  }

  // ---------------------------------------------------------------- routing
  /** The albums bar: every image, then each album the caller may see, with its count. */
  async function showAlbums() {
    const bar = $('albums');
    let answer;
    try { answer = await getJSON(api('albums')); } catch (_) { bar.hidden = true; return; }
    const albums = Array.isArray(answer.albums) ? answer.albums : [];
    const link = (text, hash, current) => {
      const a = document.createElement('a');
      a.textContent = text;
      a.href = hash;
      a.title = text;
      if (current) a.setAttribute('aria-current', 'true');
      return a;
    };
    bar.replaceChildren(
      link('All images', '#/', listing.album === null),
      ...albums.map((a) => link(`${a.name} (${a.count})`, '#/album/' + encodeURIComponent(a.name), a.name === listing.album)));
    bar.hidden = albums.length === 0;
  }

  function showAlbum(name = null) {
    chooseAlbum(name);
    showAlbums();
    hideLogin();
    stopSlideshow();
    $('help').hidden = true;
    clearViewer();
    viewer.image = null;
    viewer.index = null;
    if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
    document.title = 'tiler';
    $('viewer').hidden = true;
    $('album').hidden = false;
    const ready = listing.total === null ? loadPage(0) : Promise.resolve();
    ready.then(() => {
      status(`${listing.total} image${listing.total === 1 ? '' : 's'}`);
      layoutGrid();
      select(album.current);
      grid.focus({ preventScroll: true });
    }).catch((e) => status('Could not list the images: ' + e.message));
  }

  /** The image and view an address names (`#/image/ID?x=…`), or null for the album. */
  function parseHash(hash) {
    const match = /^#\/image\/([^?]+)(?:\?(.*))?$/.exec(hash || '#/');
    if (!match) return null;
    let id;
    try { id = decodeURIComponent(match[1]); } catch (_) { id = match[1]; }
    return { id, params: new URLSearchParams(match[2] || '') };
  }

  function route() {
    const target = parseHash(location.hash);
    const albumMatch = /^#\/album\/([^?]+)$/.exec(location.hash);
    if (target) openImage(target.id, target.params);
    else if (albumMatch) {
      let name;
      try { name = decodeURIComponent(albumMatch[1]); } catch (_) { name = albumMatch[1]; }
      showAlbum(name);
    } else showAlbum();
  }
  addEventListener('hashchange', route);
  route();

  /** For tests and the console: counters, the current view and the album's state. */
  window.tilerViewer = {
    stats,
    view: () => viewer.image && {
      id: viewer.image.id, x: viewer.cx, y: viewer.cy, scale: viewer.scale, level: viewer.level, wrap: viewer.wrap,
      index: viewer.index, activeTiles: viewer.active.size, pooled: viewer.pool.length,
      // Tiles of the current level still loading, and where the placed tiles start.
      pending: [...viewer.active.values()].filter((e) => e.level === viewer.level && !e.loaded && !e.failed).length,
      tileXs: [...viewer.active.values()].map((e) => e.tile.x),
    },
    album: () => ({
      loaded: listing.items.filter(Boolean).length, total: listing.total, current: album.current,
      columns: album.columns, cellHeight: album.cellHeight, cells: album.cells.size, pooledCells: album.pool.length,
    }),
    select,
    zoomBy: zoomCentre,
    panBy,
    maxZoom,
    /** Starts the slideshow with `seconds` between images (the button's is 5). */
    slideshow: (seconds) => startSlideshow(seconds),
    slideshowRunning: () => Boolean(slideshow.timer),
  };
})();
