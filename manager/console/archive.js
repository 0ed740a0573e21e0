// A starting workspace from an archive, read in the browser: tar (optionally gzipped) or zip
// (stored or deflated entries). The files go into `POST /v1/runs` as `workspace.files`.

const MAX_FILES = 10000;

async function inflate(bytes, format) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream(format));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function text(bytes) {
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end < 0 ? bytes : bytes.slice(0, end));
}

function octal(bytes) {
  const s = text(bytes).trim();
  return s ? parseInt(s, 8) : 0;
}

// Strip "./" and one shared top directory is kept as it is (the server refuses "..").
function clean(path) {
  return path.replace(/^(\.\/)+/, '').replace(/^\/+/, '');
}

export function readTar(bytes) {
  const files = [];
  let longName = null;
  for (let off = 0; off + 512 <= bytes.length; ) {
    const header = bytes.subarray(off, off + 512);
    if (header.every((b) => b === 0)) break;
    const size = octal(header.subarray(124, 136));
    const type = String.fromCharCode(header[156] || 48);
    const prefix = text(header.subarray(345, 500));
    let name = text(header.subarray(0, 100));
    if (prefix && text(header.subarray(257, 263)).startsWith('ustar')) name = prefix + '/' + name;
    const body = bytes.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === 'L') {
      longName = text(body);
      continue;
    }
    if (longName) {
      name = longName;
      longName = null;
    }
    if (type === 'x' || type === 'g') continue;
    if (type !== '0' && type !== '\0' && type !== '7') continue;
    const mode = octal(header.subarray(100, 108)) & 0o777;
    files.push({ path: clean(name), mode: mode & 0o111 ? 0o755 : 0o644, bytes: body.slice() });
    if (files.length > MAX_FILES) throw new Error('the archive has more than ' + MAX_FILES + ' files');
  }
  return files;
}

export async function readZip(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= Math.max(0, bytes.length - 65557); i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip file (no end of central directory)');
  const count = view.getUint16(eocd + 10, true);
  let off = view.getUint32(eocd + 16, true);
  const files = [];
  for (let n = 0; n < count; n++) {
    if (view.getUint32(off, true) !== 0x02014b50) throw new Error('corrupt zip central directory');
    const method = view.getUint16(off + 10, true);
    const csize = view.getUint32(off + 20, true);
    const nameLen = view.getUint16(off + 28, true);
    const extraLen = view.getUint16(off + 30, true);
    const commentLen = view.getUint16(off + 32, true);
    const external = view.getUint32(off + 38, true);
    const local = view.getUint32(off + 42, true);
    const name = new TextDecoder().decode(bytes.subarray(off + 46, off + 46 + nameLen));
    off += 46 + nameLen + extraLen + commentLen;
    if (name.endsWith('/')) continue;
    const localName = view.getUint16(local + 26, true);
    const localExtra = view.getUint16(local + 28, true);
    const start = local + 30 + localName + localExtra;
    const raw = bytes.subarray(start, start + csize);
    let content;
    if (method === 0) content = raw.slice();
    else if (method === 8) content = await inflate(raw, 'deflate-raw');
    else throw new Error(`${name}: unsupported zip compression method ${method}`);
    const unixMode = (external >>> 16) & 0o777;
    files.push({ path: clean(name), mode: unixMode & 0o111 ? 0o755 : 0o644, bytes: content });
    if (files.length > MAX_FILES) throw new Error('the archive has more than ' + MAX_FILES + ' files');
  }
  return files;
}

function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

// `workspace` for POST /v1/runs from an uploaded File.
export async function workspaceFrom(file) {
  let bytes = new Uint8Array(await file.arrayBuffer());
  const name = file.name.toLowerCase();
  let files;
  if (bytes[0] === 0x50 && bytes[1] === 0x4b) files = await readZip(bytes);
  else {
    if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = await inflate(bytes, 'gzip');
    else if (!name.endsWith('.tar')) throw new Error('not a zip, tar or tar.gz archive');
    files = readTar(bytes);
  }
  return { files: files.filter((f) => f.path).map((f) => ({ path: f.path, mode: f.mode, content_b64: base64(f.bytes) })) };
}
