package org.tserve.http;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.ssl.SslContext;
import java.net.BindException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.server.ResponseListeners;
import org.tserve.server.ServerContext;
import org.tserve.server.ServerExtension;
import org.tserve.util.NettyTransport;
import org.tserve.wlm.ModelManager;
import org.tserve.workflow.WorkflowRegistry;

/**
 * Binds the inference, management and metrics connectors (one port when two addresses are equal);
 * {@code https://} addresses speak TLS ({@link TlsContexts}).
 */
public final class HttpServer {
    /**
     * The request line's and the headers' caps (TorchServe has no keys for them: Netty's defaults,
     * 4096 and 8192, there). Above them Netty's decoder fails the request: 414 / 431, see
     * {@link HttpError#undecodable}.
     */
    static final int MAX_REQUEST_LINE = 8192;
    static final int MAX_HEADER_SIZE = 65536;
    /** Netty hands a body on in pieces of at most this size (no limit on the body: max_request_size is). */
    static final int MAX_CHUNK_SIZE = 65536;
    private final ConfigManager cfg;
    private final TokenAuthorization tokens;
    private final ModelManager models;
    private final List<ServerExtension> extensions;
    private final WorkflowRegistry workflows;
    private final NettyTransport transport;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final ExecutorService blocking = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "management");
        t.setDaemon(true);
        return t;
    });
    private final List<Channel> channels = new ArrayList<>();
    /** Open connections over all connectors (max_connections). */
    private final AtomicInteger openConnections = new AtomicInteger();
    /** Graceful stop: answers close their connections, the last ones close lingering. */
    private final ServerDrain drain = new ServerDrain();
    /** The TLS context of the https:// addresses (null when all are http://). */
    private SslContext tls;
    private final ResponseListeners responses;

    public HttpServer(ServerContext context, List<ServerExtension> extensions) {
        this.cfg = context.config();
        this.tokens = context.tokens();
        this.models = context.modelManager();
        this.responses = context.responses();
        this.extensions = extensions;
        // workflow archives are extracted beside the models' (<tmpdir>/workflows/<uuid>/)
        this.workflows = new WorkflowRegistry(models, cfg, java.nio.file.Paths.get(System.getProperty("java.io.tmpdir")));
        this.transport = NettyTransport.choose(cfg.getBool("use_native_io")).logFor("REST");
        this.boss = transport.newGroup(1, "http-accept");
        this.workers = transport.newGroup(nettyThreads(cfg.getInt("number_of_netty_threads")), "http");
    }

    /**
     * The event loops for client connections: {@code number_of_netty_threads}, or one per core when
     * 0 (TorchServe's documented default; Netty's own, two per core, measured 20-30 % more frontend
     * CPU per request on two cores: more wake-ups and context switches for the same work).
     */
    static int nettyThreads(int configured) {
        return configured > 0 ? configured : Runtime.getRuntime().availableProcessors();
    }

    /** Binds all connectors; a port that cannot be bound throws a ConfigException naming the key. */
    public void start() throws InterruptedException {
        ConfigManager.Address inf = cfg.address("inference_address");
        ConfigManager.Address mgmt = cfg.address("management_address");
        ConfigManager.Address metrics = cfg.address("metrics_address");
        if (inf.tls || mgmt.tls || (metrics.tls && cfg.getBool("enable_metrics_api"))) {
            tls = TlsContexts.server(cfg);
        }
        if (inf.host.equals(mgmt.host) && inf.port == mgmt.port) {
            bind("inference_address", inf, ConnectorType.INFERENCE_AND_MANAGEMENT);
        } else {
            bind("inference_address", inf, ConnectorType.INFERENCE);
            bind("management_address", mgmt, ConnectorType.MANAGEMENT);
        }
        if (cfg.getBool("enable_metrics_api")) {
            bind("metrics_address", metrics, ConnectorType.METRICS);
        }
    }

    private void bind(String key, ConfigManager.Address a, ConnectorType type) throws InterruptedException {
        ApiDescription description = new ApiDescription(tokens.isEnabled(), models.memberJobs().enabled());
        RouteTable.Apis apis = new RouteTable.Apis(new InferenceApi(models, description), new ManagementApi(models, cfg, tokens, blocking, description),
                new WorkflowApi(workflows, models, cfg, blocking, description));
        int maxRequest = cfg.getInt("max_request_size");
        int maxConnections = cfg.getInt("max_connections");
        int idle = cfg.getInt("connection_idle_timeout");
        int read = cfg.getInt("request_read_timeout");
        ServerBootstrap b = new ServerBootstrap().group(boss, workers).channel(transport.serverChannel())
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        if (!ConnectionGuard.admit(ch, openConnections, maxConnections, a.tls)) {
                            return;
                        }
                        drain.track(ch);
                        if (a.tls) {
                            ch.pipeline().addLast(tls.newHandler(ch.alloc()));
                        }
                        ConnectionGuard guard = new ConnectionGuard(idle, read);
                        ch.pipeline().addLast(guard.bytes());
                        ch.pipeline().addLast(new HttpServerCodec(decoderConfig(), PipelineSequencer.CODEC_DEPTH));
                        ch.pipeline().addLast(guard.messages());
                        ch.pipeline().addLast(new PipelineSequencer(maxRequest));
                        ch.pipeline().addLast(new TransferCodings());
                        ch.pipeline().addLast(new RequestDecompressor(maxRequest));
                        ch.pipeline().addLast(new SizeLimitedAggregator(maxRequest));
                        ch.pipeline().addLast(new RequestHandler(type, cfg, tokens, apis, extensions,
                                description, responses, drain));
                    }
                });
        try {
            channels.add(b.bind(a.host, a.port).sync().channel());
        } catch (Exception e) {
            if (e instanceof BindException || e.getCause() instanceof BindException
                    || String.valueOf(e.getMessage()).contains("Address already in use")) {
                throw new ConfigException("Cannot bind " + key + " " + a + ": " + e.getMessage()
                        + " (is another server running? choose another port in config.properties)");
            }
            throw new ConfigException("Cannot bind " + key + " " + a + ": " + e);
        }
    }

    static HttpDecoderConfig decoderConfig() {
        return new HttpDecoderConfig().setMaxInitialLineLength(MAX_REQUEST_LINE).setMaxHeaderSize(MAX_HEADER_SIZE)
                .setMaxChunkSize(MAX_CHUNK_SIZE);
    }

    /**
     * Stops accepting new connections. Open connections keep getting their answers, each with
     * {@code Connection: close}; a request that arrives from now on is answered 503.
     */
    public void stopAccepting() {
        // the listeners close first: a client that reconnects after a closing answer is refused,
        // never queued in a backlog that the listener's close would reset
        for (Channel c : channels) {
            c.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        }
        drain.start();
    }

    /** Closes everything. */
    public void shutdown() {
        stopAccepting();
        drain.closeAll();   // lingering: a request a client sends meanwhile is dropped, not met with a reset
        blocking.shutdownNow();
        workflows.shutdown();
        boss.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
