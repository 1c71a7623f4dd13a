package org.tserve.config;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import javax.xml.XMLConstants;
import javax.xml.parsers.DocumentBuilder;
import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.parsers.ParserConfigurationException;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;
import org.xml.sax.ErrorHandler;
import org.xml.sax.SAXException;
import org.xml.sax.SAXParseException;

/**
 * The logger levels of a TorchServe log4j2 XML file ({@code --log-config}, which the launcher
 * passes as {@code -Dlog4j.configurationFile}): {@code <Loggers>}' {@code <Logger name level>}
 * (and {@code AsyncLogger}) and {@code <Root level>} (and {@code AsyncRoot}). Appenders, patterns,
 * filters and properties are not interpreted. A file that cannot be read or parsed, or a level
 * that is not a log4j2 level, is a {@link ConfigException} naming the file and the problem.
 */
public final class LogConfig {
    /** The system property TorchServe's launcher sets (also settable through {@code vmargs}). */
    public static final String PROPERTY = "log4j.configurationFile";
    /** log4j2's level names, most to least severe, as the message lists them. */
    private static final List<String> LEVELS = List.of("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL");
    /** log4j2's level of a Root that the file does not configure. */
    private static final String DEFAULT_ROOT = "ERROR";

    private final File file;
    private final Map<String, String> levels;
    private final List<String> skipped;

    private LogConfig(File file, Map<String, String> levels, List<String> skipped) {
        this.file = file;
        this.levels = Collections.unmodifiableMap(levels);
        this.skipped = Collections.unmodifiableList(skipped);
    }

    public File file() {
        return file;
    }

    /** Configured levels by logger name ({@code ""} = Root), upper case (OFF .. ALL), in file order. */
    public Map<String, String> levels() {
        return levels;
    }

    /** Level values that were left alone (property substitutions such as {@code ${sys:x}}), as {@code name=value}. */
    public List<String> skipped() {
        return skipped;
    }

    /**
     * The level a log4j2 logger of this name gets: its own, else that of the nearest configured
     * parent ({@code a.b} for {@code a.b.c}), else Root's (ERROR when the file has no Root).
     */
    public String effectiveLevel(String loggerName) {
        String n = loggerName;
        while (!n.isEmpty()) {
            String l = levels.get(n);
            if (l != null) {
                return l;
            }
            int dot = n.lastIndexOf('.');
            n = dot < 0 ? "" : n.substring(0, dot);
        }
        return levels.getOrDefault("", DEFAULT_ROOT);
    }

    /**
     * The files named by a {@code log4j.configurationFile} value: comma-separated paths or
     * {@code file:} URIs (log4j2 merges several; here later files win per logger).
     */
    public static List<File> locations(String property) {
        List<File> out = new ArrayList<>();
        for (String part : property.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            if (p.startsWith("file:")) {
                try {
                    out.add(new File(new URI(p)));
                    continue;
                } catch (URISyntaxException | IllegalArgumentException e) {
                    p = p.substring("file:".length()).replaceFirst("^//", "");
                }
            }
            out.add(new File(p).getAbsoluteFile());
        }
        return out;
    }

    /** Reads {@code file}; the message of a failure names the file and the problem. */
    public static LogConfig parse(File file) {
        String where = "Log config " + file + " (--log-config / -D" + PROPERTY + ")";
        if (!file.isFile()) {
            throw new ConfigException(where + " does not exist or is not a file; give a log4j2 XML file");
        }
        Element root;
        try {
            root = builder().parse(file).getDocumentElement();
        } catch (SAXParseException e) {
            throw new ConfigException(where + " is not valid XML: line " + e.getLineNumber() + ", column "
                    + e.getColumnNumber() + ": " + e.getMessage() + " (tserve reads log4j2 XML files only)");
        } catch (SAXException | IOException | ParserConfigurationException e) {
            throw new ConfigException(where + " cannot be read: " + e.getMessage());
        }
        if (!root.getTagName().equalsIgnoreCase("Configuration")) {
            throw new ConfigException(where + " has root element <" + root.getTagName()
                    + ">; a log4j2 XML file has <Configuration>");
        }
        Map<String, String> levels = new LinkedHashMap<>();
        List<String> skipped = new ArrayList<>();
        for (Element loggers : children(root, "Loggers")) {
            for (Element e : children(loggers, null)) {
                String tag = e.getTagName().toLowerCase(Locale.ROOT);
                String name;
                if (tag.equals("root") || tag.equals("asyncroot")) {
                    name = "";
                } else if (tag.equals("logger") || tag.equals("asynclogger")) {
                    name = e.getAttribute("name").trim();
                    if (name.isEmpty()) {
                        throw new ConfigException(where + " has a <" + e.getTagName() + "> without a name attribute");
                    }
                } else {
                    continue;
                }
                String level = e.getAttribute("level").trim();
                if (level.isEmpty()) {
                    continue;   // no level: it inherits, as in log4j2
                }
                if (level.contains("${")) {
                    skipped.add((name.isEmpty() ? "Root" : name) + "=" + level);
                    continue;
                }
                String upper = level.toUpperCase(Locale.ROOT);
                if (!LEVELS.contains(upper)) {
                    throw new ConfigException(where + ": " + (name.isEmpty() ? "Root" : "logger " + name)
                            + " has level \"" + level + "\"; use one of " + String.join(", ", LEVELS));
                }
                levels.put(name, upper);
            }
        }
        return new LogConfig(file, levels, skipped);
    }

    /** Merges several files: a later file's level wins for each logger it configures. */
    public static LogConfig merge(List<LogConfig> configs) {
        Map<String, String> levels = new LinkedHashMap<>();
        List<String> skipped = new ArrayList<>();
        File last = null;
        for (LogConfig c : configs) {
            levels.putAll(c.levels);
            skipped.addAll(c.skipped);
            last = c.file;
        }
        return new LogConfig(last, levels, skipped);
    }

    private static List<Element> children(Element parent, String tag) {
        List<Element> out = new ArrayList<>();
        NodeList nodes = parent.getChildNodes();
        for (int i = 0; i < nodes.getLength(); i++) {
            Node n = nodes.item(i);
            if (n instanceof Element && (tag == null || ((Element) n).getTagName().equalsIgnoreCase(tag))) {
                out.add((Element) n);
            }
        }
        return out;
    }

    /** A DOM parser that reads no external entities or DTDs and reports errors only by exception. */
    private static DocumentBuilder builder() throws ParserConfigurationException {
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setFeature(XMLConstants.FEATURE_SECURE_PROCESSING, true);
        f.setAttribute(XMLConstants.ACCESS_EXTERNAL_DTD, "");
        f.setAttribute(XMLConstants.ACCESS_EXTERNAL_SCHEMA, "");
        f.setExpandEntityReferences(false);
        f.setXIncludeAware(false);
        f.setNamespaceAware(false);
        DocumentBuilder b = f.newDocumentBuilder();
        b.setErrorHandler(new ErrorHandler() {
            @Override
            public void warning(SAXParseException e) {
                // not worth a line: the file parsed
            }

            @Override
            public void error(SAXParseException e) throws SAXException {
                throw e;
            }

            @Override
            public void fatalError(SAXParseException e) throws SAXException {
                throw e;
            }
        });
        return b;
    }
}
