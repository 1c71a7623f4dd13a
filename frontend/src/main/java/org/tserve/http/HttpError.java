package org.tserve.http;

/** An error to answer with TorchServe's JSON shape {@code {"code", "type", "message"}}. */
public final class HttpError extends Exception {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final String type;

    public HttpError(int status, String type, String message) {
        super(message);
        this.status = status;
        this.type = type;
    }

    /** An error whose type is TorchServe's exception name for the status. */
    public HttpError(int status, String message) {
        this(status, typeFor(status), message);
    }

    public int getStatus() {
        return status;
    }

    public String getType() {
        return type;
    }

    /** TorchServe's exception class name for an HTTP status. */
    public static String typeFor(int status) {
        switch (status) {
            case 400: return "BadRequestException";
            case 401: return "InvalidKeyException";
            case 403: return "InvalidModelVersionException";
            case 404: return "ModelNotFoundException";
            case 405: return "MethodNotAllowedException";
            case 408: return "RequestTimeoutException";
            case 409: return "ConflictStatusException";
            case 413: return "RequestEntityTooLargeException";
            case 503: return "ServiceUnavailableException";
            case 504: return "RequestTimeoutException";
            case 507: return "InsufficientStorageException";
            default: return "InternalServerException";
        }
    }

    /**
     * A request Netty's decoder could not read: a request line or headers above their caps
     * (414 / 431, naming the cap), else 400 with Netty's reason. Netty sends such a request on
     * as HTTP/1.0, so the answer closes the connection (the rest of the bytes are not a request).
     */
    static HttpError undecodable(Throwable cause) {
        if (cause instanceof io.netty.handler.codec.http.TooLongHttpHeaderException) {
            return new HttpError(431, "RequestHeaderFieldsTooLargeException", "The request's headers are larger than "
                    + HttpServer.MAX_HEADER_SIZE + " bytes (tserve's fixed limit); send fewer or shorter headers");
        }
        if (cause instanceof io.netty.handler.codec.http.TooLongHttpLineException) {
            return new HttpError(414, "UriTooLongException", "The request line (method, URI, version) is longer than "
                    + HttpServer.MAX_REQUEST_LINE + " bytes (tserve's fixed limit); send a shorter URI, "
                    + "with long data in the body");
        }
        // Netty's reason without its exception class: the client needs the problem, not our internals
        String reason = cause == null || cause.getMessage() == null ? "the request cannot be parsed"
                : cause.getMessage();
        return new HttpError(400, "Invalid HTTP request: " + reason + ". The connection is closed: the "
                + "bytes after a request that cannot be parsed are not read as requests");
    }

    static HttpError notFound() {
        return new HttpError(404, "ResourceNotFoundException", "Requested resource is not found, please refer to API document.");
    }

    static HttpError methodNotAllowed() {
        return new HttpError(405, "MethodNotAllowedException", "Requested method is not allowed, please refer to API document.");
    }
}
