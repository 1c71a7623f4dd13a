package org.tserve.archive;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.regex.Pattern;

/**
 * Turns a register {@code url} into a local archive path: a name in the model store, a local
 * path, or a {@code file://} / {@code http(s)://} URL allowed by {@code allowed_urls}
 * (downloaded into the model store with a size limit).
 */
public final class ModelLocator {
    /** Where an archive was found; {@code downloaded} is set when tserve fetched it. */
    public static final class Located {
        public final Path path;
        public final Path downloaded;

        Located(Path path, Path downloaded) {
            this.path = path;
            this.downloaded = downloaded;
        }
    }

    private final String modelStore;
    private final List<String> allowedUrls;
    private final long maxDownloadSize;

    public ModelLocator(String modelStore, List<String> allowedUrls, long maxDownloadSize) {
        this.modelStore = modelStore;
        this.allowedUrls = allowedUrls;
        this.maxDownloadSize = maxDownloadSize;
    }

    public Located locate(String url) throws ArchiveException {
        if (url == null || url.trim().isEmpty()) {
            throw new ArchiveException(400, "Parameter url is required.");
        }
        if (url.contains("..")) {
            throw new ArchiveException(404, "Relative path is not allowed in url: " + url);
        }
        String lower = url.toLowerCase(java.util.Locale.ROOT);
        boolean remote = lower.startsWith("http://") || lower.startsWith("https://");
        boolean fileUrl = lower.startsWith("file://");
        if (remote || fileUrl) {
            if (!allowed(url)) {
                throw new ArchiveException(404, "Given URL " + url + " does not match any allowed URL(s): " + allowedUrls
                        + " (config key allowed_urls)");
            }
            if (fileUrl) {
                Path p = Paths.get(URI.create(url));
                if (!Files.exists(p)) {
                    throw new ArchiveException(404, "Model not found at: " + url);
                }
                return new Located(p, null);
            }
            return download(url);
        }
        Path p = Paths.get(url);
        if (p.isAbsolute() && Files.exists(p)) {
            return new Located(p, null);
        }
        if (modelStore != null) {
            Path inStore = Paths.get(modelStore).resolve(url);
            if (Files.exists(inStore)) {
                return new Located(inStore, null);
            }
        }
        throw new ArchiveException(404, "Model not found at: " + url + (modelStore == null ? " (no model store configured)"
                : " (looked in model store " + modelStore + ")"));
    }

    private boolean allowed(String url) {
        for (String re : allowedUrls) {
            if (Pattern.compile(re, Pattern.CASE_INSENSITIVE).matcher(url).matches()) {
                return true;
            }
        }
        return false;
    }

    private Located download(String url) throws ArchiveException {
        if (modelStore == null) {
            throw new ArchiveException(400, "Cannot download " + url + ": no model store configured (model_store / -s)");
        }
        String path = URI.create(url).getPath();
        String name = path == null ? "" : path.substring(path.lastIndexOf('/') + 1);
        if (name.isEmpty()) {
            throw new ArchiveException(400, "Cannot tell the archive's file name from url " + url);
        }
        Path target = Paths.get(modelStore).resolve(name);
        if (Files.exists(target)) {
            throw new ArchiveException(409, "Model file already exists " + target + "; remove it or register it by name");
        }
        Path part = target.resolveSibling(name + ".part");
        try {
            HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
            c.setConnectTimeout(30000);
            c.setReadTimeout(60000);
            int code = c.getResponseCode();
            if (code != 200) {
                throw new ArchiveException(400, "Failed to download archive from: " + url + " (HTTP " + code + ")");
            }
            long declared = c.getContentLengthLong();
            if (declared > maxDownloadSize) {
                throw new ArchiveException(413, "Archive at " + url + " is " + declared + " bytes, above max_download_size "
                        + maxDownloadSize);
            }
            long total = 0;
            try (InputStream in = c.getInputStream(); OutputStream out = Files.newOutputStream(part)) {
                byte[] buf = new byte[65536];
                int n;
                while ((n = in.read(buf)) > 0) {
                    total += n;
                    if (total > maxDownloadSize) {
                        throw new ArchiveException(413, "Archive at " + url + " exceeds max_download_size " + maxDownloadSize
                                + " bytes");
                    }
                    out.write(buf, 0, n);
                }
            }
            Files.move(part, target);
            return new Located(target, target);
        } catch (IOException e) {
            throw new ArchiveException(400, "Failed to download archive from: " + url + " (" + e.getMessage() + ")");
        } finally {
            try {
                Files.deleteIfExists(part);
            } catch (IOException ignored) {
                // best effort
            }
        }
    }
}
