package org.tserve.archive;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

/**
 * Unpacks {@code .mar} (zip) and {@code .tar.gz} archives, refusing entries that escape the
 * target and archives that go past {@link ExtractionLimits}. No size read from an archive decides
 * an allocation: tar long names and PAX headers are read in chunks, bounded by
 * {@link #MAX_META_BYTES}, and must be followed by the bytes they declare.
 */
public final class Extractor {
    /** Largest GNU long name ({@code L}/{@code K}) or PAX ({@code x}/{@code g}) header data accepted. */
    static final int MAX_META_BYTES = 1 << 20;

    private Extractor() {
    }

    /** Unzips a .mar into {@code dest} with the current limits. */
    public static void unzip(Path archive, Path dest) throws IOException, ArchiveException {
        unzip(archive, dest, ExtractionLimits.current());
    }

    /** Unzips a .mar into {@code dest}. */
    public static void unzip(Path archive, Path dest, ExtractionLimits limits) throws IOException, ArchiveException {
        ExtractionLimits.Budget budget = new ExtractionLimits.Budget(limits, String.valueOf(archive.getFileName()),
                Files.size(archive));
        try (ZipInputStream zin = new ZipInputStream(new BufferedInputStream(Files.newInputStream(archive)))) {
            ZipEntry e;
            boolean any = false;
            while ((e = nextEntry(zin, archive)) != null) {
                any = true;
                budget.entry();
                Path target = safeResolve(dest, e.getName(), archive);
                if (e.isDirectory()) {
                    Files.createDirectories(target);
                } else {
                    Files.createDirectories(target.getParent());
                    copy(zin, target, Long.MAX_VALUE, budget);
                }
            }
            if (!any) {
                throw new ArchiveException(400, "Model archive " + archive.getFileName() + " is not a valid zip (.mar) file");
            }
        }
    }

    /** The next zip entry; a name that is not valid UTF-8 is a 400 (the JDK throws IllegalArgumentException). */
    private static ZipEntry nextEntry(ZipInputStream zin, Path archive) throws IOException, ArchiveException {
        try {
            return zin.getNextEntry();
        } catch (IllegalArgumentException e) {
            throw new ArchiveException(400, "Model archive " + archive.getFileName() + " is not a valid zip (.mar) file: "
                    + "an entry's name is not valid UTF-8 (" + e.getMessage() + ")");
        }
    }

    /** Extracts a .tar.gz into {@code dest} with the current limits. */
    public static void untarGz(Path archive, Path dest) throws IOException, ArchiveException {
        untarGz(archive, dest, ExtractionLimits.current());
    }

    /** Extracts a .tar.gz into {@code dest}, dropping the first path component of every entry. */
    public static void untarGz(Path archive, Path dest, ExtractionLimits limits) throws IOException, ArchiveException {
        String file = String.valueOf(archive.getFileName());
        ExtractionLimits.Budget budget = new ExtractionLimits.Budget(limits, file, Files.size(archive));
        try (InputStream in = new Counted(new GZIPInputStream(new BufferedInputStream(Files.newInputStream(archive))), budget)) {
            byte[] header = new byte[512];
            String longName = null;
            long paxSize = -1;
            while (true) {
                if (!readBlock(in, header)) {
                    break;
                }
                if (isZero(header)) {
                    break;
                }
                budget.entry();
                String name = cstr(header, 0, 100);
                String prefix = cstr(header, 345, 155);
                if (!prefix.isEmpty() && new String(header, 257, 5, StandardCharsets.US_ASCII).equals("ustar")) {
                    name = prefix + "/" + name;
                }
                long size = size(header, file, name);
                char type = (char) header[156];
                if (type == 'L' || type == 'x') {
                    byte[] data = readMeta(in, size, file, name);
                    if (type == 'L') {
                        longName = cstr(data, 0, data.length);
                    } else {
                        java.util.Map<String, String> pax = paxRecords(data, file);
                        if (pax.containsKey("path")) {
                            longName = pax.get("path");
                        }
                        if (pax.containsKey("size")) {
                            paxSize = paxSize(pax.get("size"), file);
                        }
                    }
                    continue;
                }
                if (longName != null) {
                    name = longName;
                    longName = null;
                }
                if (paxSize >= 0) {
                    size = paxSize;
                    paxSize = -1;
                }
                String stripped = stripFirst(name);
                if (type == '0' || type == '\0' || type == '5') {
                    if (stripped.isEmpty()) {
                        skip(in, padded(size));
                        continue;
                    }
                    Path target = safeResolve(dest, stripped, archive);
                    if (type == '5') {
                        Files.createDirectories(target);
                        skip(in, padded(size));
                    } else {
                        Files.createDirectories(target.getParent());
                        copy(in, target, size, null);   // counted by the stream, skipped data too
                        skip(in, padded(size) - size);
                    }
                } else {
                    skip(in, padded(size));   // links, devices, global headers, GNU 'K': not model content
                }
            }
        } catch (java.util.zip.ZipException e) {
            throw new ArchiveException(400, "Model archive " + file + " is neither a .mar (zip) nor a .tar.gz: "
                    + e.getMessage());
        } catch (EOFException e) {
            throw new ArchiveException(400, "Model archive " + file + " is truncated: an entry declares more bytes than "
                    + "follow it");
        } catch (OverLimit e) {
            throw e.limit;
        }
    }

    /** Carries a limit's ArchiveException through InputStream methods. */
    private static final class OverLimit extends IOException {
        private static final long serialVersionUID = 1L;
        final transient ArchiveException limit;

        OverLimit(ArchiveException limit) {
            super(limit.getMessage());
            this.limit = limit;
        }
    }

    /** Charges every decompressed byte, read or skipped, to the extraction budget. */
    private static final class Counted extends java.io.FilterInputStream {
        private final ExtractionLimits.Budget budget;

        Counted(InputStream in, ExtractionLimits.Budget budget) {
            super(in);
            this.budget = budget;
        }

        private long charge(long n) throws OverLimit {
            if (n > 0) {
                try {
                    budget.bytes(n);
                } catch (ArchiveException e) {
                    throw new OverLimit(e);
                }
            }
            return n;
        }

        @Override
        public int read() throws IOException {
            int b = super.read();
            if (b >= 0) {
                charge(1);
            }
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            return (int) charge(super.read(b, off, len));
        }

        @Override
        public long skip(long n) throws IOException {
            return charge(super.skip(n));
        }
    }

    /** {@code size} rounded up to whole 512-byte blocks. */
    private static long padded(long size) {
        return size + (512 - size % 512) % 512;
    }

    /** The size field of a tar header: octal digits, or GNU base-256 (high bit set); never negative. */
    static long size(byte[] h, String file, String entry) throws ArchiveException {
        if ((h[124] & 0x80) != 0) {
            if ((h[124] & 0x40) != 0) {
                throw badSize(file, entry);
            }
            long v = h[124] & 0x3f;
            for (int i = 125; i < 136; i++) {
                if (v > (Long.MAX_VALUE >>> 8) / 2) {
                    throw badSize(file, entry);
                }
                v = (v << 8) | (h[i] & 0xff);
            }
            return v;
        }
        long v = 0;
        boolean digits = false;
        for (int i = 124; i < 136; i++) {
            byte c = h[i];
            if (c == 0 || c == ' ') {
                if (digits) {
                    break;
                }
                continue;
            }
            if (c < '0' || c > '7') {
                throw badSize(file, entry);
            }
            digits = true;
            v = v * 8 + (c - '0');   // 12 octal digits stay below 2^36
        }
        return v;
    }

    private static ArchiveException badSize(String file, String entry) {
        return new ArchiveException(400, "Model archive " + file + " has a tar header with an invalid size field (entry "
                + org.tserve.util.LogText.quote(entry) + ")");
    }

    private static long paxSize(String v, String file) throws ArchiveException {
        try {
            long n = Long.parseLong(v.trim());
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw new ArchiveException(400, "Model archive " + file + " has a PAX header with an invalid size record");
    }

    /** PAX records {@code "<len> <key>=<value>\n"}; a malformed record is an error. */
    static java.util.Map<String, String> paxRecords(byte[] data, String file) throws ArchiveException {
        java.util.Map<String, String> out = new java.util.HashMap<>();
        int pos = 0;
        while (pos < data.length && data[pos] != 0) {
            int sp = pos;
            long len = 0;
            while (sp < data.length && data[sp] >= '0' && data[sp] <= '9' && len <= data.length) {
                len = len * 10 + (data[sp] - '0');
                sp++;
            }
            if (sp >= data.length || data[sp] != ' ' || len <= sp - pos + 1 || pos + len > data.length
                    || data[(int) (pos + len - 1)] != '\n') {
                throw new ArchiveException(400, "Model archive " + file + " has a malformed PAX header record");
            }
            String rec = new String(data, sp + 1, (int) (pos + len - 1 - (sp + 1)), StandardCharsets.UTF_8);
            int eq = rec.indexOf('=');
            if (eq > 0) {
                out.put(rec.substring(0, eq), rec.substring(eq + 1));
            }
            pos += (int) len;
        }
        return out;
    }

    private static String stripFirst(String name) {
        String n = name;
        while (n.startsWith("./")) {
            n = n.substring(2);
        }
        int i = n.indexOf('/');
        return i < 0 ? "" : n.substring(i + 1);
    }

    /** Resolves an entry name under dest, refusing absolute names and {@code ..} escapes (zip slip). */
    static Path safeResolve(Path dest, String name, Path archive) throws ArchiveException {
        Path base = dest.toAbsolutePath().normalize();
        Path target;
        try {
            target = base.resolve(name).normalize();
        } catch (java.nio.file.InvalidPathException e) {
            throw new ArchiveException(400, "Model archive " + archive.getFileName() + " has an entry with an invalid name: "
                    + org.tserve.util.LogText.quote(name));
        }
        if (!target.startsWith(base) || name.startsWith("/")) {
            throw new ArchiveException(400, "Model archive " + archive.getFileName() + " has an entry outside the archive: "
                    + org.tserve.util.LogText.quote(name));
        }
        return target;
    }

    private static void copy(InputStream in, Path target, long size, ExtractionLimits.Budget budget)
            throws IOException, ArchiveException {
        byte[] buf = new byte[65536];
        long left = size;
        try (OutputStream out = Files.newOutputStream(target)) {
            while (left > 0) {
                int n = in.read(buf, 0, (int) Math.min(buf.length, left));
                if (n < 0) {
                    if (size == Long.MAX_VALUE) {
                        return;
                    }
                    throw new EOFException("archive truncated");
                }
                if (budget != null) {
                    budget.bytes(n);
                }
                out.write(buf, 0, n);
                left -= n;
            }
        }
    }

    /**
     * The data of a long-name or PAX header: at most {@link #MAX_META_BYTES}, read in chunks so
     * that memory follows the bytes present, not the size declared.
     */
    private static byte[] readMeta(InputStream in, long size, String file, String entry) throws IOException, ArchiveException {
        if (size > MAX_META_BYTES) {
            throw new ArchiveException(400, "Model archive " + file + " has a tar long-name or PAX header of " + size
                    + " bytes (entry " + org.tserve.util.LogText.quote(entry) + "); at most " + MAX_META_BYTES
                    + " bytes are accepted");
        }
        ByteArrayOutputStream data = new ByteArrayOutputStream((int) Math.min(size, 8192));
        byte[] buf = new byte[8192];
        long left = size;
        while (left > 0) {
            int n = in.read(buf, 0, (int) Math.min(buf.length, left));
            if (n < 0) {
                throw new EOFException("archive truncated");
            }
            data.write(buf, 0, n);
            left -= n;
        }
        skip(in, padded(size) - size);
        return data.toByteArray();
    }

    private static boolean readBlock(InputStream in, byte[] b) throws IOException {
        int off = 0;
        while (off < b.length) {
            int n = in.read(b, off, b.length - off);
            if (n < 0) {
                return false;
            }
            off += n;
        }
        return true;
    }

    private static void skip(InputStream in, long n) throws IOException {
        long left = n;
        while (left > 0) {
            long s = in.skip(left);
            if (s <= 0) {
                if (in.read() < 0) {
                    throw new EOFException("archive truncated");
                }
                s = 1;
            }
            left -= s;
        }
    }

    private static boolean isZero(byte[] b) {
        for (byte x : b) {
            if (x != 0) {
                return false;
            }
        }
        return true;
    }

    private static String cstr(byte[] b, int off, int len) {
        int end = off;
        while (end < off + len && b[end] != 0) {
            end++;
        }
        return new String(b, off, end - off, StandardCharsets.UTF_8);
    }
}
