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
import org.tserve.config.Compatibility;
import org.tserve.util.LogText;

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
        // The store is the operator's path, not a URL: `..` in it (workflow_store=../resources/x,
        // TorchServe's own test config) is resolved here, so only the url's own segments are checked.
        this.modelStore = modelStore == null ? null : Paths.get(modelStore).toAbsolutePath().normalize().toString();
        this.allowedUrls = allowedUrls;
        this.maxDownloadSize = maxDownloadSize;
    }

    /**
     * Finds the archive of a register {@code url}. Every form obeys the same rule: the decoded,
     * normalised location must lie in the model store, or match {@code allowed_urls} (a local
     * path as {@code file://<path>}); {@code ..} segments are refused before and after decoding,
     * and every redirect of a download is checked like the URL itself.
     */
    public Located locate(String url) throws ArchiveException {
        if (url == null || url.trim().isEmpty()) {
            throw new ArchiveException(400, "Parameter url is required.");
        }
        if (url.contains("..")) {
            throw new ArchiveException(404, "Relative path is not allowed in url: " + url);
        }
        String lower = url.toLowerCase(java.util.Locale.ROOT);
        if (lower.startsWith("http://") || lower.startsWith("https://")) {
            requireAllowed(url, url);
            return download(url);
        }
        boolean fileUrl = lower.startsWith("file:");
        Path p;
        try {
            if (fileUrl) {
                p = Paths.get(URI.create(url));
            } else {
                p = Paths.get(url);
                if (!p.isAbsolute()) {
                    if (modelStore == null) {
                        throw new ArchiveException(404, "Model not found at: " + url + " (no model store configured)");
                    }
                    p = Paths.get(modelStore).resolve(p);
                }
            }
        } catch (IllegalArgumentException | java.nio.file.FileSystemNotFoundException e) {
            throw new ArchiveException(400, "Invalid url " + url + ": " + e.getMessage()
                    + " (give a name in the model store, an absolute path, file:///<path> or an http(s) URL)");
        }
        for (Path segment : p) {
            if (segment.toString().equals("..")) {   // decoded from %2e%2e and the like
                throw new ArchiveException(404, "Relative path is not allowed in url: " + url);
            }
        }
        Path local = p.toAbsolutePath().normalize();
        if (!inStore(local) && !allowed("file://" + local)) {
            throw new ArchiveException(404, "Given URL " + url + " (" + local + ") is outside the model store " + modelStore
                    + " and does not match any allowed URL(s): " + allowedUrls + " (config key allowed_urls)");
        }
        if (!Files.exists(local)) {
            throw new ArchiveException(404, "Model not found at: " + url + (modelStore == null ? " (no model store configured)"
                    : fileUrl || Paths.get(url).isAbsolute() ? "" : " (looked in model store " + modelStore + ")"));
        }
        return new Located(local, null);
    }

    /** True when {@code p} (absolute, normalised) is in the model store. */
    private boolean inStore(Path p) {
        if (modelStore == null) {
            return false;
        }
        Path store = Paths.get(modelStore).toAbsolutePath().normalize();
        return p.startsWith(store) && !p.equals(store);
    }

    /**
     * An http(s) URL must match {@code allowed_urls} both as written and as the remote server
     * reads it (its path percent-decoded), and may hold no dot segment ({@code .}, {@code ..},
     * also encoded as {@code %2e}) nor an encoded {@code /} or {@code \}: servers that normalise
     * such paths would serve a file outside the allowed prefix.
     */
    private void requireAllowed(String url, String asked) throws ArchiveException {
        String normalised = normalisedHttpUrl(url, asked);
        if (!allowed(url) || !allowed(normalised)) {
            throw new ArchiveException(404, "Given URL " + asked + (url.equals(asked) ? "" : " redirects to " + url + ", which")
                    + " does not match any allowed URL(s): " + allowedUrls + " (config key allowed_urls)");
        }
    }

    /** {@code url} with its path percent-decoded; 400 for dot segments and encoded separators. */
    static String normalisedHttpUrl(String url, String asked) throws ArchiveException {
        URI u;
        try {
            u = new URI(url);
        } catch (java.net.URISyntaxException e) {
            throw new ArchiveException(400, "Invalid url " + LogText.quote(asked) + ": " + e.getReason());
        }
        String raw = u.getRawPath() == null ? "" : u.getRawPath();
        String lowerRaw = raw.toLowerCase(java.util.Locale.ROOT);
        if (lowerRaw.contains("%2f") || lowerRaw.contains("%5c")) {
            throw new ArchiveException(400, "Invalid url " + LogText.quote(asked) + ": an encoded '/' or '\\' (%2F, %5C) in "
                    + "the path is refused (servers disagree on what it names); write the path with plain '/'");
        }
        String path = u.getPath() == null ? "" : u.getPath();   // decoded; no %2F left to split wrongly
        for (String segment : path.split("/", -1)) {
            if (segment.equals(".") || segment.equals("..")) {
                throw new ArchiveException(400, "Invalid url " + LogText.quote(asked) + ": its path holds the dot segment '"
                        + segment + "' (also when written %2e); give the archive's path without '.' or '..' segments");
            }
        }
        String authority = u.getRawAuthority() == null ? "" : u.getRawAuthority();
        return u.getScheme() + "://" + authority + path + (u.getRawQuery() == null ? "" : "?" + u.getRawQuery());
    }

    private boolean allowed(String url) {
        for (String re : allowedUrls) {
            if (Pattern.compile(re, Pattern.CASE_INSENSITIVE).matcher(url).matches()) {
                return true;
            }
        }
        return false;
    }

    /** Most redirects a download follows, each checked against allowed_urls. */
    static final int MAX_REDIRECTS = 5;

    /**
     * Opens {@code url}, following at most {@link #MAX_REDIRECTS} redirects itself so that every
     * hop is checked against {@code allowed_urls} (HttpURLConnection would follow them unchecked).
     */
    private HttpURLConnection open(String url) throws IOException, ArchiveException {
        String current = url;
        for (int hop = 0; ; hop++) {
            HttpURLConnection c = (HttpURLConnection) new URL(current).openConnection();
            c.setInstanceFollowRedirects(false);
            c.setConnectTimeout(30000);
            c.setReadTimeout(60000);
            int code = c.getResponseCode();
            if (code != 301 && code != 302 && code != 303 && code != 307 && code != 308) {
                return c;
            }
            String location = c.getHeaderField("Location");
            c.disconnect();
            if (location == null || location.isEmpty()) {
                throw new ArchiveException(400, "Failed to download archive from: " + url + " (HTTP " + code
                        + " without a Location)");
            }
            if (hop >= MAX_REDIRECTS) {
                throw new ArchiveException(400, "Failed to download archive from: " + url + " (more than " + MAX_REDIRECTS
                        + " redirects)");
            }
            String next;
            try {
                next = new URL(new URL(current), location).toString();
            } catch (java.net.MalformedURLException e) {
                throw new ArchiveException(400, "Failed to download archive from: " + url + " (bad redirect Location "
                        + org.tserve.util.LogText.quote(location) + ")");
            }
            String lower = next.toLowerCase(java.util.Locale.ROOT);
            if (!lower.startsWith("http://") && !lower.startsWith("https://")) {
                throw new ArchiveException(404, "Given URL " + url + " redirects to " + next
                        + ", which is not an http(s) URL");
            }
            requireAllowed(next, url);
            current = next;
        }
    }

    private Located download(String url) throws ArchiveException {
        if (modelStore == null) {
            throw new ArchiveException(400, "Cannot download " + url + ": no model store configured (model_store / -s)");
        }
        String path;
        try {
            path = URI.create(url).getPath();
        } catch (IllegalArgumentException e) {
            throw new ArchiveException(400, "Invalid url " + url + ": " + e.getMessage());
        }
        String name = path == null ? "" : path.substring(path.lastIndexOf('/') + 1);
        if (name.isEmpty() || name.equals(".") || name.equals("..") || name.indexOf('\0') >= 0) {
            throw new ArchiveException(400, "Cannot tell the archive's file name from url " + url);
        }
        Path target = Paths.get(modelStore).resolve(name);
        if (Files.exists(target)) {
            throw new ArchiveException(Compatibility.current().archiveExistsStatus(),
                    "Model file already exists " + target + "; remove it or register it by name");
        }
        Path part = target.resolveSibling(name + ".part");
        try {
            HttpURLConnection c = open(url);
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
