// tiler's embeddable album widgets: a photo strip and an endless cover flow.
//
// One file by design, longer than the 600 lines the Swift sources keep to: the server
// embeds it in the binary and sends it as is, with no bundler or module loader between,
// so that the page needs one request for its script and works from any path prefix.
//
// Mounted into every element of the page that has `data-tiler-album` (the album's name;
// empty for every image the caller may see), as `data-tiler-mode` says: `strip` (the
// default) or `coverflow`. The server's /embed/strip and /embed/coverflow pages are one
// such element each; any other site mounts them by loading this script from the server:
//
//   <div data-tiler-album="Holidays" data-tiler-mode="coverflow" style="height: 320px"></div>
//   <script src="https://tiles.example.org/viewer/embed.js" async></script>
//
// The server's address is where this script came from (BASE/viewer/embed.js → BASE/), so
// the widgets work under --base-url and any path prefix. A share token (private images)
// is the element's `data-tiler-token`, else the script's own `?token=`, else, on a page of
// the server's own origin (the /embed/ pages), the page's `?token=`; like the viewer, the
// widgets carry it into every URL of the server they make, the viewer's link included.
//
// Both widgets are virtual, like the viewer's album: the listing comes a page of /images
// at a time, only for the photos near the screen; only those photos have elements, and
// elements leaving the screen are reused for the ones coming in, so 1,000 photos keep a
// few dozen elements. Each photo is a link (`data-id`) to the viewer at `#/image/ID`, in
// the top window or, with `data-tiler-target="_blank"`, a new tab; one photo at a time is
// in the tab order, and the arrow keys, Home, End, Page Up and Page Down move it.
//
// Strip (seed 001): a row of photos that scrolls sideways and snaps so that no photo is
// cut at its start. Cover flow (seed 004): the album repeated without end around a centre
// photo (aria-current), snapped to the centre; the scroller holds a fixed number of slots
// and, whenever it comes to rest away from the middle, is moved back to it by whole slots
// while every photo moves with it, so nothing on screen changes. Its page control (seed
// 003) is a tab list of at most seven dots, a window over the album that follows the
// centre photo; a dot scrolls the flow to its photo.
'use strict';
(() => {
  const script = document.currentScript;
  const scriptURL = new URL(script && script.src ? script.src : 'viewer/embed.js', document.baseURI);
  /** The server's address: BASE/, the folder above this script's. */
  const server = new URL('../', scriptURL);
  const pageToken = scriptURL.searchParams.get('token')
    || (location.origin === server.origin ? new URLSearchParams(location.search).get('token') : null);
  const reducedMotion = matchMedia('(prefers-reduced-motion: reduce)').matches;
  const mod = (a, n) => ((a % n) + n) % n;
  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
  /** What a person calls an image: its title, else its id. */
  const titleOf = (image) => image.title || image.id;
  /** The most dots the cover flow's page control shows, whatever the album's length. */
  const maximumDots = 7;

  function stylesheet() {
    if (document.querySelector('link[data-tiler-embed-style]')) return;
    const link = document.createElement('link');
    link.rel = 'stylesheet';
    link.href = new URL('viewer/embed.css', server).href;
    link.dataset.tilerEmbedStyle = '';
    document.head.append(link);
  }

  function element(tag, className, attributes = {}) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
    return el;
  }

  // ---------------------------------------------------------------- the listing
  /**
   * One album's listing: /images a page at a time, kept sparse (items[i] once its page
   * has arrived). If the total changes, the pages known so far are dropped and fetched
   * again as they are needed.
   */
  class Listing {
    constructor(album, token, changed) {
      this.album = album;
      this.token = token;
      this.changed = changed;
      this.pageSize = 20;
      this.total = null;
      this.items = [];
      this.pages = new Map();
      this.pagesLoaded = 0;
      this.error = null;
      this.retryDelays = new Map();  // page → seconds before it is asked for again after a failure
    }

    /** A URL of the server, with the token when there is one. */
    url(path) {
      const url = new URL(path, server);
      if (this.token && url.origin === server.origin) url.searchParams.set('token', this.token);
      return url.href;
    }

    /** A link from /images as this page should ask for it (root-relative ones under BASE/). */
    link(link) { return this.url(link.startsWith('/') && !link.startsWith('//') ? link.slice(1) : link); }

    /** The viewer at image `id`. */
    viewerLink(id) {
      const url = new URL(this.url(''));
      url.hash = '#/image/' + encodeURIComponent(id);
      return url.href;
    }

    /** Fetches the pages holding images `first…last` (indices of the listing) not asked for yet. */
    need(first, last) {
      if (this.total !== null) { first = clamp(first, 0, this.total - 1); last = clamp(last, 0, this.total - 1); }
      for (let page = Math.floor(first / this.pageSize); page <= Math.floor(last / this.pageSize); page++) this.load(page);
    }

    load(page) {
      if (this.pages.has(page)) return this.pages.get(page);
      const query = `images?offset=${page * this.pageSize}&limit=${this.pageSize}`
        + (this.album ? '&album=' + encodeURIComponent(this.album) : '');
      const promise = fetch(this.url(query)).then(async (response) => {
        if (!response.ok) {
          let message = response.status + ' ' + response.statusText;
          try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
          throw new Error(message);
        }
        return response.json();
      }).then((answer) => {
        if (this.total !== null && this.total !== answer.total) { this.items = []; this.pages = new Map([[page, promise]]); }
        this.total = answer.total;
        answer.images.forEach((image, k) => { this.items[answer.offset + k] = { ...image, thumbnailURL: this.link(image.thumbnail.url) }; });
        this.pagesLoaded++;
        this.retryDelays.delete(page);
        this.error = null;
        this.changed();
      }, (error) => {
        // Asked for again after 1, 2, 4, … 30 s (while it is still needed), not at once.
        const delay = Math.min(30, this.retryDelays.get(page) || 1);
        this.retryDelays.set(page, delay * 2);
        setTimeout(() => { this.pages.delete(page); this.changed(); }, delay * 1000);
        this.error = error.message;
        this.changed();
      });
      this.pages.set(page, promise);
      return promise;
    }
  }

  // ---------------------------------------------------------------- the widgets' common part
  /**
   * What both widgets share: the listing, the scroller with its track, a pool of photo
   * elements (`li > a[data-id] > img`), previous and next buttons, and a status line.
   */
  class Widget {
    constructor(host, mode) {
      this.host = host;
      this.mode = mode;
      const album = host.dataset.tilerAlbum || '';
      this.target = host.dataset.tilerTarget === '_blank' ? '_blank' : '_top';
      const token = host.dataset.tilerToken || pageToken;
      this.listing = new Listing(album, token, () => this.listingChanged());
      this.stats = { thumbnailsRequested: 0, thumbnailsLoaded: 0, cellsCreated: 0, cellsReused: 0, recentres: 0 };
      this.cells = new Map();  // position → element, for the photos near the screen
      this.pool = [];          // detached elements ready for reuse
      this.current = 0;        // the photo in the tab order
      const noun = mode === 'strip' ? 'Photo strip' : 'Cover flow';
      const label = host.dataset.tilerLabel || (album ? `${noun}: ${album}` : noun);

      this.root = element('div', `tiler-widget tiler-${mode}`, { role: 'region', 'aria-label': label });
      this.scroller = element('div', 'tiler-scroller');
      this.track = element('ul', 'tiler-track', { 'aria-label': label });
      this.scroller.append(this.track);
      this.previous = element('button', 'tiler-nav tiler-previous', { type: 'button', 'aria-label': 'Previous photo', title: 'Previous photo' });
      this.previous.textContent = '‹';
      this.next = element('button', 'tiler-nav tiler-next', { type: 'button', 'aria-label': 'Next photo', title: 'Next photo' });
      this.next.textContent = '›';
      this.status = element('p', 'tiler-status', { role: 'status', 'aria-live': 'polite' });
      this.root.append(this.scroller, this.previous, this.next, this.status);
      host.replaceChildren(this.root);

      this.track.addEventListener('keydown', (e) => this.keydown(e));
      let frame = 0;
      this.scroller.addEventListener('scroll', () => {
        if (!frame) frame = requestAnimationFrame(() => { frame = 0; this.scrolled(); });
        // `scrollend` where the browser has it (it waits for the finger to lift); else a pause.
        if (!('onscrollend' in window)) { clearTimeout(this.restTimer); this.restTimer = setTimeout(() => this.rested(), 250); }
      }, { passive: true });
      this.scroller.addEventListener('scrollend', () => this.rested());
      // On the next frame: laying out now could resize the page again within this
      // notification (a host page's scroll bar coming or going), which browsers report as an error.
      let resizeFrame = 0;
      new ResizeObserver(() => {
        if (!resizeFrame) resizeFrame = requestAnimationFrame(() => { resizeFrame = 0; this.layout(); });
      }).observe(this.root);
      this.listing.load(0);
    }

    /** A photo element, new or reused. */
    dequeue() {
      let li = this.pool.pop();
      if (li) { this.stats.cellsReused++; return li; }
      li = element('li', 'tiler-slot');
      const a = element('a', 'tiler-photo', { tabindex: '-1' });
      a.target = this.target;
      if (this.target === '_blank') a.rel = 'noopener';
      const img = element('img', '', { alt: '', draggable: 'false', decoding: 'async' });
      img.addEventListener('load', () => { if (img.getAttribute('src')) { img.classList.add('loaded'); this.stats.thumbnailsLoaded++; } });
      a.append(img);
      li.append(a);
      this.stats.cellsCreated++;
      return li;
    }

    enqueue(li) {
      li.remove();
      const a = li.firstChild, img = a.firstChild;
      img.removeAttribute('src');
      img.classList.remove('loaded');
      img.alt = '';
      delete a.dataset.id;
      a.removeAttribute('href');
      a.removeAttribute('aria-current');
      this.pool.push(li);
    }

    /** Keeps elements for `positions` only (reusing the others), each filled by `fill`. */
    keep(positions) {
      for (const [p, li] of this.cells) if (!positions.has(p)) { this.cells.delete(p); this.enqueue(li); }
      const fragment = document.createDocumentFragment();
      for (const p of positions) {
        let li = this.cells.get(p);
        if (!li) { li = this.dequeue(); this.cells.set(p, li); fragment.append(li); }
        this.place(li, p);
        this.fill(li, this.indexAt(p));
      }
      this.track.append(fragment);
    }

    /** Shows image `i` of the listing in `li`: its link, its thumbnail, its name. */
    fill(li, i) {
      const a = li.firstChild, img = a.firstChild;
      const total = this.listing.total || 0;
      li.setAttribute('aria-setsize', String(total));
      li.setAttribute('aria-posinset', String(i + 1));
      const image = this.listing.items[i];
      if (!image) {
        if (a.dataset.id) { delete a.dataset.id; img.removeAttribute('src'); img.classList.remove('loaded'); }
        a.removeAttribute('href');
        a.removeAttribute('aria-label');
        return;
      }
      if (a.dataset.id === image.id) return;
      a.dataset.id = image.id;
      a.href = this.listing.viewerLink(image.id);
      a.setAttribute('aria-label', `${titleOf(image)}, photo ${i + 1} of ${total}; opens the viewer`);
      img.alt = titleOf(image);
      img.classList.remove('loaded');
      img.src = image.thumbnailURL;
      this.stats.thumbnailsRequested++;
    }

    listingChanged() {
      const total = this.listing.total;
      if (this.listing.error && !total) this.say(`Could not list the photos: ${this.listing.error}`, true);
      else if (total === 0) this.say('No photos', true);
      else if (this.status.classList.contains('shown')) this.say('', false);
      this.layout();
    }

    /** A line for screen readers, or also on screen (`shown`) when there are no photos to show. */
    say(text, shown) {
      this.status.classList.toggle('shown', shown);
      if (this.status.textContent !== text) this.status.textContent = text;
    }

    keydown(e) {
      if (e.altKey || e.metaKey || e.ctrlKey || !this.listing.total) return;
      const page = this.pageStep();
      const moves = { ArrowLeft: -1, ArrowRight: 1, PageUp: -page, PageDown: page };
      if (e.key in moves) { e.preventDefault(); this.move(moves[e.key]); }
      else if (e.key === 'Home') { e.preventDefault(); this.moveTo(0); }
      else if (e.key === 'End') { e.preventDefault(); this.moveTo(this.listing.total - 1); }
    }

    /** Gives the focus to the current photo, if the focus is in the widget. */
    focusCurrent() {
      if (!this.root.contains(document.activeElement) || document.activeElement.tagName === 'BUTTON') return;
      const li = this.cells.get(this.current);
      if (li && document.activeElement !== li.firstChild) li.firstChild.focus({ preventScroll: true });
    }

    /** Every photo element's link in the tab order or not: only the current one is. */
    updateTabOrder() {
      for (const [p, li] of this.cells) li.firstChild.tabIndex = p === this.current ? 0 : -1;
    }

    /** Whether scrolling to `left` moves the scroller (there is then a `scrollend` to wait for). */
    willScroll(left) {
      const max = this.scroller.scrollWidth - this.scroller.clientWidth;
      return Math.abs(clamp(left, 0, max) - this.scroller.scrollLeft) >= 1;
    }

    scrollTo(left, smooth) {
      this.scroller.scrollTo({ left, behavior: smooth && !reducedMotion ? 'smooth' : 'instant' });
    }

    /** A widget's state, for tests and the curious. */
    state() {
      return {
        mode: this.mode, total: this.listing.total, current: this.current, scrollLeft: this.scroller.scrollLeft,
        pitch: this.pitch, moving: Boolean(this.moving), elements: this.root.querySelectorAll('*').length, cells: this.cells.size,
        listingPagesLoaded: this.listing.pagesLoaded, ...this.stats,
      };
    }
  }

  // ---------------------------------------------------------------- the strip
  /**
   * Photos in a row, each in a box of the same size (the thumbnail cropped to fill it),
   * position p = image p. The track is as wide as every photo, and a little wider so that
   * the last scroll position also starts at a whole photo.
   */
  class Strip extends Widget {
    constructor(host) {
      super(host, 'strip');
      this.previous.setAttribute('aria-label', 'Previous photos');
      this.previous.title = 'Previous photos';
      this.next.setAttribute('aria-label', 'Next photos');
      this.next.title = 'Next photos';
      this.previous.addEventListener('click', () => this.page(-1));
      this.next.addEventListener('click', () => this.page(1));
    }

    indexAt(p) { return p; }

    layout() {
      const total = this.listing.total || 0;
      const width = this.scroller.clientWidth || 1, height = this.scroller.clientHeight || 1;
      const pitch = this.pitch;
      this.gap = 8;
      const boxHeight = Math.max(24, height - 2 * this.gap);
      this.boxWidth = Math.max(24, Math.min(Math.round(boxHeight * 4 / 3), width - 2 * this.gap));
      this.boxHeight = boxHeight;
      this.pitch = this.boxWidth + this.gap;
      const content = this.gap + total * this.pitch;
      this.track.style.width = (content <= width ? content : width + Math.ceil((content - width) / this.pitch) * this.pitch) + 'px';
      this.scroller.style.scrollPaddingLeft = this.gap + 'px';
      if (pitch && pitch !== this.pitch) this.scroller.scrollTo({ left: Math.round(this.scroller.scrollLeft / pitch) * this.pitch, behavior: 'instant' });
      this.render();
    }

    place(li, p) {
      li.style.left = this.gap + p * this.pitch + 'px';
      li.style.top = this.gap + 'px';
      li.style.width = this.boxWidth + 'px';
      li.style.height = this.boxHeight + 'px';
    }

    /** Page Up and Page Down: a screenful. */
    pageStep() { return this.onScreen(); }

    /** Whole photos on screen. */
    onScreen() { return Math.max(1, Math.floor((this.scroller.clientWidth - this.gap) / this.pitch)); }

    /** The first photo on screen. */
    first() { return Math.round(this.scroller.scrollLeft / this.pitch); }

    render() {
      const total = this.listing.total || 0;
      if (!total) { this.keep(new Set()); this.updateButtons(); return; }
      const left = this.scroller.scrollLeft, width = this.scroller.clientWidth;
      const margin = 2;
      const first = Math.max(0, Math.floor(left / this.pitch) - margin);
      const last = Math.min(total - 1, Math.ceil((left + width) / this.pitch) + margin);
      this.current = clamp(this.current, 0, total - 1);
      const positions = new Set([this.current]);
      for (let i = first; i <= last; i++) positions.add(i);
      // Nearing the end of what has arrived: the next page is asked for now.
      this.listing.need(first, last + this.onScreen());
      this.keep(positions);
      this.updateTabOrder();
      this.updateButtons();
    }

    scrolled() {
      // Scrolled away from the current photo (a swipe, the wheel, a button): the current
      // one becomes the first whole photo on screen.
      const first = this.first(), onScreen = this.onScreen();
      if (!this.moving && (this.current < first || this.current >= first + onScreen)) this.current = first;
      this.render();
    }

    rested() {
      this.moving = false;
      this.render();
      this.focusCurrent();
    }

    updateButtons() {
      const max = this.scroller.scrollWidth - this.scroller.clientWidth;
      this.previous.disabled = this.scroller.scrollLeft <= 1;
      this.next.disabled = this.scroller.scrollLeft >= max - 1;
      this.previous.hidden = this.next.hidden = max <= 1;
    }

    move(step) { this.moveTo(this.current + step); }

    /** Makes photo `i` current and scrolls it on screen, whole, if it is not. */
    moveTo(i) {
      const total = this.listing.total || 0;
      this.current = clamp(i, 0, total - 1);
      const first = this.first(), onScreen = this.onScreen();
      let target = null;
      if (this.current < first) target = this.current;
      else if (this.current >= first + onScreen) target = this.current - onScreen + 1;
      this.render();
      this.focusCurrent();
      // Far away (End, Home): there at once, without scrolling past (and asking for) everything between.
      if (target !== null && this.willScroll(target * this.pitch)) {
        this.moving = true;
        this.scrollTo(target * this.pitch, Math.abs(target - first) <= 3 * onScreen);
      }
    }

    /** A screenful of photos back or on. */
    page(direction) {
      const onScreen = this.onScreen();
      this.current = clamp(this.first() + direction * onScreen, 0, (this.listing.total || 1) - 1);
      this.moving = this.willScroll(this.current * this.pitch);
      this.scrollTo(this.current * this.pitch, true);
    }
  }

  // ---------------------------------------------------------------- the cover flow
  /**
   * The album repeated without end. Position v (any integer) shows image v mod total, in
   * slot v − shift of the scroller, which holds `slots` slots; slot s is at the centre
   * when scrollLeft = s × pitch. `current` is the position at the centre (or, while a
   * key's or a dot's scroll is under way, the one it goes to).
   */
  class CoverFlow extends Widget {
    constructor(host) {
      super(host, 'coverflow');
      /** Whether the flow goes back to its middle slot whenever it rests (off only to show that nothing moves when it does). */
      this.recentring = true;
      this.slots = 400;
      this.shift = -200;       // slot 200, the middle, shows position 0
      this.current = 0;
      this.centre = 0;         // the position nearest the centre now
      this.dots = element('div', 'tiler-dots', { role: 'tablist', 'aria-label': 'Choose a photo' });
      this.dotStart = 0;
      this.root.append(this.dots);
      this.dots.addEventListener('click', (e) => {
        const dot = e.target.closest('[role="tab"]');
        if (dot) this.goToIndex(Number(dot.dataset.index));
      });
      this.dots.addEventListener('keydown', (e) => {
        const total = this.listing.total || 0;
        const moves = { ArrowLeft: -1, ArrowRight: 1 };
        if (!total || e.altKey || e.metaKey || e.ctrlKey) return;
        // The focus stays on the selected dot as the window of dots moves.
        this.focusDot = true;
        if (e.key in moves) { e.preventDefault(); this.go(this.current + moves[e.key]); }
        else if (e.key === 'Home') { e.preventDefault(); this.goToIndex(0); }
        else if (e.key === 'End') { e.preventDefault(); this.goToIndex(total - 1); }
      });
      this.previous.addEventListener('click', () => this.move(-1));
      this.next.addEventListener('click', () => this.move(1));
    }

    indexAt(v) { return mod(v, this.listing.total || 1); }

    layout() {
      const width = this.scroller.clientWidth || 1, height = this.scroller.clientHeight || 1;
      const pitch = this.pitch;
      this.height = height;
      this.side = Math.max(24, Math.round(Math.min(height - 16, width * 0.6)));
      this.pitch = Math.max(12, Math.round(this.side * 0.55));
      this.pad = (width - this.pitch) / 2;
      this.track.style.width = this.slots * this.pitch + (width - this.pitch) + 'px';
      for (const [v, li] of this.cells) this.place(li, v);
      // At first, and when the size changed: the same photo at the centre.
      if (pitch !== this.pitch || this.laidOutWidth !== width) this.scroller.scrollTo({ left: (this.centre - this.shift) * this.pitch, behavior: 'instant' });
      this.laidOutWidth = width;
      this.render();
    }

    place(li, v) {
      li.style.left = this.pad + (v - this.shift) * this.pitch + 'px';
      li.style.width = this.pitch + 'px';
      const a = li.firstChild;
      a.style.width = a.style.height = this.side + 'px';
      a.style.left = (this.pitch - this.side) / 2 + 'px';
      a.style.top = (this.height - this.side) / 2 + 'px';
    }

    /** Page Up and Page Down: as many photos as the page control has dots. */
    pageStep() { return maximumDots; }

    render() {
      const total = this.listing.total || 0;
      if (!total) { this.keep(new Set()); this.dots.replaceChildren(); this.previous.hidden = this.next.hidden = true; return; }
      this.previous.hidden = this.next.hidden = false;
      const exact = this.scroller.scrollLeft / this.pitch + this.shift;
      this.centre = Math.round(exact);
      const reach = Math.ceil(this.scroller.clientWidth / 2 / this.pitch) + 2;
      const positions = new Set();
      for (let v = this.centre - reach; v <= this.centre + reach; v++) positions.add(v);
      positions.add(this.current);
      for (const v of positions) this.listing.need(this.indexAt(v), this.indexAt(v));
      this.keep(positions);
      // Nearer the centre, larger, in front and facing the viewer; farther, turned towards it.
      for (const [v, li] of this.cells) {
        const d = v - exact, distance = Math.abs(d);
        const a = li.firstChild;
        a.style.transform = `perspective(800px) rotateY(${clamp(-d * 55, -55, 55)}deg) scale(${1 - Math.min(distance, 3) * 0.12})`;
        li.style.zIndex = String(1000 - Math.round(distance * 10));
        if (v === this.centre) a.setAttribute('aria-current', 'true');
        else a.removeAttribute('aria-current');
      }
      this.updateTabOrder();
      this.updateDots();
    }

    updateTabOrder() {
      for (const [v, li] of this.cells) li.firstChild.tabIndex = v === this.centre ? 0 : -1;
    }

    /** The page control: a window of at most `maximumDots` over the album, holding the centre photo. */
    updateDots() {
      const total = this.listing.total || 0;
      const count = Math.min(total, maximumDots);
      const selected = this.indexAt(this.moving ? this.current : this.centre);
      if (selected < this.dotStart) this.dotStart = selected;
      else if (selected >= this.dotStart + count) this.dotStart = selected - count + 1;
      this.dotStart = clamp(this.dotStart, 0, total - count);
      while (this.dots.children.length > count) this.dots.lastChild.remove();
      while (this.dots.children.length < count) this.dots.append(element('button', 'tiler-dot', { type: 'button', role: 'tab' }));
      for (let k = 0; k < count; k++) {
        const dot = this.dots.children[k], i = this.dotStart + k;
        const image = this.listing.items[i];
        dot.dataset.index = String(i);
        dot.setAttribute('aria-selected', String(i === selected));
        dot.tabIndex = i === selected ? 0 : -1;
        dot.setAttribute('aria-label', `Photo ${i + 1} of ${total}` + (image ? `: ${titleOf(image)}` : ''));
        dot.title = `Photo ${i + 1} of ${total}`;
      }
      if (this.focusDot && this.dots.contains(document.activeElement)) {
        const dot = this.dots.querySelector('[aria-selected="true"]');
        if (dot && dot !== document.activeElement) dot.focus({ preventScroll: true });
      }
    }

    scrolled() {
      if (!this.moving) this.current = Math.round(this.scroller.scrollLeft / this.pitch + this.shift);
      // Close to either end of the slots (a long fling): back to the middle at once.
      const slot = this.current - this.shift;
      if (slot < 20 || slot > this.slots - 20) this.recentre();
      this.render();
    }

    rested() {
      this.moving = false;
      this.focusDot = false;
      this.current = this.centre = Math.round(this.scroller.scrollLeft / this.pitch + this.shift);
      if (this.recentring) this.recentre();
      this.render();
      this.focusCurrent();
      const total = this.listing.total || 0, image = this.listing.items[this.indexAt(this.centre)];
      if (total && image) this.say(`${titleOf(image)}, photo ${this.indexAt(this.centre) + 1} of ${total}`, false);
    }

    /**
     * Moves the scroller back to its middle slot by whole slots, and every photo with it,
     * in one go: the same photos at the same places on screen, and room to scroll either way.
     */
    recentre() {
      const exact = this.scroller.scrollLeft / this.pitch + this.shift;
      const slots = Math.round(exact) - this.shift - this.slots / 2;
      if (slots === 0) return;
      const left = this.scroller.scrollLeft - slots * this.pitch;
      this.shift += slots;
      for (const [v, li] of this.cells) this.place(li, v);
      this.scroller.scrollTo({ left, behavior: 'instant' });
      this.moving = false;
      this.stats.recentres++;
    }

    move(step) { this.go(this.current + step); }

    moveTo(i) { this.goToIndex(i); }

    state() { return { ...super.state(), centre: this.indexAt(this.centre), position: this.centre, shift: this.shift }; }

    /** Scrolls image `i` to the centre, the shorter way round. */
    goToIndex(i) {
      const total = this.listing.total || 0;
      if (!total) return;
      let delta = mod(i - this.indexAt(this.current), total);
      if (delta > total / 2) delta -= total;
      this.go(this.current + delta);
    }

    /** Scrolls position `v` to the centre (the slots re-centred first if it lies beyond them). */
    go(v) {
      if (v - this.shift < 1 || v - this.shift > this.slots - 1) {
        this.recentre();
        v = clamp(v, this.shift + 1, this.shift + this.slots - 1);
      }
      this.current = v;
      this.moving = this.willScroll((v - this.shift) * this.pitch);
      this.render();
      this.focusCurrent();
      this.scrollTo((v - this.shift) * this.pitch, Math.abs(v - this.centre) <= 10);
    }

    focusCurrent() {
      if (!this.track.contains(document.activeElement)) return;
      const li = this.cells.get(this.moving ? this.current : this.centre);
      if (li && document.activeElement !== li.firstChild) li.firstChild.focus({ preventScroll: true });
    }
  }

  // ---------------------------------------------------------------- mounting
  const widgets = [];
  /** Mounts the widget `element` asks for (once). */
  function mount(host) {
    if (host.tilerWidget) return host.tilerWidget;
    stylesheet();
    const mode = host.dataset.tilerMode || 'strip';
    if (mode !== 'strip' && mode !== 'coverflow') {
      host.textContent = `tiler: data-tiler-mode must be strip or coverflow, not ${mode}`;
      console.error(host.textContent);
      return null;
    }
    const widget = mode === 'strip' ? new Strip(host) : new CoverFlow(host);
    host.tilerWidget = widget;
    widgets.push(widget);
    return widget;
  }
  const mountAll = () => document.querySelectorAll('[data-tiler-album]').forEach(mount);
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', mountAll);
  else mountAll();
  window.tilerEmbed = { mount, widgets, state: () => widgets.map((w) => w.state()) };
})();
