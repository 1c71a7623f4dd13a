package org.tserve.archive;

import java.io.BufferedInputStream;
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

/** Unpacks {@code .mar} (zip) and {@code .tar.gz} archives, refusing entries that escape the target. */
public final class Extractor {
    private Extractor() {
    }

    /** Unzips a .mar into {@code dest}. */
    public static void unzip(Path archive, Path dest) throws IOException, ArchiveException {
        try (ZipInputStream zin = new ZipInputStream(new BufferedInputStream(Files.newInputStream(archive)))) {
            ZipEntry e;
            boolean any = false;
            while ((e = zin.getNextEntry()) != null) {
                any = true;
                Path target = safeResolve(dest, e.getName(), archive);
                if (e.isDirectory()) {
                    Files.createDirectories(target);
                } else {
                    Files.createDirectories(target.getParent());
                    copy(zin, target, Long.MAX_VALUE);
                }
            }
            if (!any) {
                throw new ArchiveException(400, "Model archive " + archive.getFileName() + " is not a valid zip (.mar) file");
            }
        }
    }

    /** Extracts a .tar.gz into {@code dest}, dropping the first path component of every entry. */
    public static void untarGz(Path archive, Path dest) throws IOException, ArchiveException {
        try (InputStream in = new GZIPInputStream(new BufferedInputStream(Files.newInputStream(archive)))) {
            byte[] header = new byte[512];
            String longName = null;
            while (true) {
                if (!readBlock(in, header)) {
                    break;
                }
                if (isZero(header)) {
                    break;
                }
                String name = cstr(header, 0, 100);
                String prefix = cstr(header, 345, 155);
                if (!prefix.isEmpty() && new String(header, 257, 5, StandardCharsets.US_ASCII).equals("ustar")) {
                    name = prefix + "/" + name;
                }
                long size = octal(header, 124, 12);
                char type = (char) header[156];
                if (longName != null) {
                    name = longName;
                    longName = null;
                }
                if (type == 'L' || type == 'x') {
                    byte[] data = readData(in, size);
                    if (type == 'L') {
                        longName = cstr(data, 0, data.length);
                    } else {
                        String path = paxPath(new String(data, StandardCharsets.UTF_8));
                        if (path != null) {
                            longName = path;
                        }
                    }
                    continue;
                }
                String stripped = stripFirst(name);
                if (type == '0' || type == '\0' || type == '5') {
                    if (stripped.isEmpty()) {
                        skip(in, size);
                        continue;
                    }
                    Path target = safeResolve(dest, stripped, archive);
                    if (type == '5') {
                        Files.createDirectories(target);
                    } else {
                        Files.createDirectories(target.getParent());
                        copy(in, target, size);
                        skip(in, (512 - size % 512) % 512);
                    }
                } else {
                    skip(in, size);   // links, devices, global headers: not model content
                }
            }
        } catch (java.util.zip.ZipException e) {
            throw new ArchiveException(400, "Model archive " + archive.getFileName() + " is neither a .mar (zip) nor a .tar.gz: "
                    + e.getMessage());
        }
    }

    private static String paxPath(String records) {
        for (String line : records.split("\n")) {
            int sp = line.indexOf(' ');
            int eq = line.indexOf('=');
            if (sp > 0 && eq > sp && line.substring(sp + 1, eq).equals("path")) {
                return line.substring(eq + 1);
            }
        }
        return null;
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
        Path target = base.resolve(name).normalize();
        if (!target.startsWith(base) || name.startsWith("/")) {
            throw new ArchiveException(400, "Model archive " + archive.getFileName() + " has an entry outside the archive: " + name);
        }
        return target;
    }

    private static void copy(InputStream in, Path target, long size) throws IOException {
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
                out.write(buf, 0, n);
                left -= n;
            }
        }
    }

    private static byte[] readData(InputStream in, long size) throws IOException {
        byte[] data = new byte[(int) size];
        int off = 0;
        while (off < size) {
            int n = in.read(data, off, (int) size - off);
            if (n < 0) {
                throw new EOFException("archive truncated");
            }
            off += n;
        }
        skip(in, (512 - size % 512) % 512);
        return data;
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

    private static long octal(byte[] b, int off, int len) {
        long v = 0;
        for (int i = off; i < off + len; i++) {
            byte c = b[i];
            if (c == 0 || c == ' ') {
                if (v != 0) {
                    break;
                }
                continue;
            }
            v = v * 8 + (c - '0');
        }
        return v;
    }
}
