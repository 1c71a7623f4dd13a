package org.tserve.grpc;

import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;
import org.apache.logging.log4j.Logger;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;

/**
 * The two gRPC servers: inference on {@code grpc_inference_address:grpc_inference_port} (7070;
 * TorchServe's inference service and the Open Inference Protocol's GRPCInferenceService) and management on {@code grpc_management_address:grpc_management_port} (7071), TLS with
 * {@code enable_grpc_ssl=true} ({@code certificate_file}, {@code private_key_file}), inbound
 * messages up to {@code max_request_size}, token authorization like REST.
 */
public final class GrpcServers {
    private static final Logger LOG = Logging.logger(GrpcServers.class);

    private final List<Server> servers = new ArrayList<>();
    private EventLoopGroup ownBoss;
    private EventLoopGroup ownWorkers;
    private Server inference;
    private Server management;

    /** Starts both servers on their own Netty event loops. */
    public static GrpcServers start(ConfigManager cfg, ModelManager models, TokenAuthorization auth) throws IOException {
        return start(cfg, models, auth, null, null);
    }

    /**
     * Starts both servers; {@code boss}/{@code workers} are the REST servers' NIO event loop groups
     * to share (both null = own groups).
     */
    public static GrpcServers start(ConfigManager cfg, ModelManager models, TokenAuthorization auth,
                                    EventLoopGroup boss, EventLoopGroup workers) throws IOException {
        GrpcServers g = new GrpcServers();
        if (boss == null || workers == null) {
            g.ownBoss = new NioEventLoopGroup(1);
            g.ownWorkers = new NioEventLoopGroup(Math.max(2, Runtime.getRuntime().availableProcessors()));
            boss = g.ownBoss;
            workers = g.ownWorkers;
        }
        java.util.Set<String> open = cfg.getBool("health_check_no_auth") ? AuthInterceptor.PROBES : java.util.Set.of();
        try {
            g.inference = g.build(cfg, "inference", boss, workers)
                .addService(ServerInterceptors.intercept(new InferenceService(models), new CallContextInterceptor(),
                    new AuthInterceptor(auth, TokenAuthorization.KeyType.INFERENCE, open)))
                .addService(ServerInterceptors.intercept(new OpenInferenceService(models, serverVersion()),
                    new CallContextInterceptor(), new AuthInterceptor(auth, TokenAuthorization.KeyType.INFERENCE, open)))
                .build().start();
            g.servers.add(g.inference);
            g.management = g.build(cfg, "management", boss, workers)
                .addService(ServerInterceptors.intercept(new ManagementService(models, cfg.isModelApiEnabled()),
                    new CallContextInterceptor(), new AuthInterceptor(auth, TokenAuthorization.KeyType.MANAGEMENT, java.util.Set.of())))
                .build().start();
            g.servers.add(g.management);
        } catch (IOException | RuntimeException e) {
            g.stop();
            throw e;
        }
        LOG.info("gRPC inference API bound to " + g.inference.getListenSockets()
                + ", gRPC management API bound to " + g.management.getListenSockets());
        return g;
    }

    private NettyServerBuilder build(ConfigManager cfg, String which, EventLoopGroup boss, EventLoopGroup workers)
            throws SSLException {
        String host = cfg.get("grpc_" + which + "_address");
        int port = cfg.getInt("grpc_" + which + "_port");
        NettyServerBuilder b = NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
            .channelType(NioServerSocketChannel.class)
            .bossEventLoopGroup(boss)
            .workerEventLoopGroup(workers)
            .maxInboundMessageSize(cfg.getInt("max_request_size"));
        long age = cfg.getLong("grpc_" + which + "_max_connection_age_ms");
        if (age > 0 && age < Long.MAX_VALUE) {
            b.maxConnectionAge(age, TimeUnit.MILLISECONDS);
        }
        long grace = cfg.getLong("grpc_" + which + "_max_connection_age_grace_ms");
        if (grace > 0 && grace < Long.MAX_VALUE) {
            b.maxConnectionAgeGrace(grace, TimeUnit.MILLISECONDS);
        }
        if (cfg.getBool("enable_grpc_ssl")) {
            File cert = pemFile(cfg, "certificate_file");
            File key = pemFile(cfg, "private_key_file");
            SslContext ssl;
            try {
                ssl = GrpcSslContexts.forServer(cert, key).build();
            } catch (UnsupportedOperationException | IllegalArgumentException e) {
                ssl = JdkAlpn.serverContext(cert, key);   // Netty without ALPN support (Debian's 4.1.48)
            }
            b.sslContext(ssl);
        }
        return b;
    }

    private static String serverVersion() {
        try {
            return org.tserve.ModelServer.version();
        } catch (RuntimeException | LinkageError e) {
            return "unknown";
        }
    }

    private static File pemFile(ConfigManager cfg, String key) {
        String v = cfg.get(key);
        if (v == null || v.trim().isEmpty()) {
            throw new ConfigException("enable_grpc_ssl=true needs '" + key + "' (a PEM file) in config.properties");
        }
        File f = new File(v.trim());
        if (!f.isFile()) {
            throw new ConfigException("'" + key + "' = " + v + " does not exist; enable_grpc_ssl=true needs a PEM file there");
        }
        return f;
    }

    /** The bound inference port (useful when configured as 0). */
    public int inferencePort() {
        return inference.getPort();
    }

    /** The bound management port. */
    public int managementPort() {
        return management.getPort();
    }

    /** Stops accepting calls, gives running calls up to 5 s, then closes the servers and own event loops. */
    public void stop() {
        for (Server s : servers) {
            s.shutdown();
        }
        for (Server s : servers) {
            try {
                if (!s.awaitTermination(5, TimeUnit.SECONDS)) {
                    s.shutdownNow();
                }
            } catch (InterruptedException e) {
                s.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
        servers.clear();
        if (ownBoss != null) {
            ownBoss.shutdownGracefully(0, 2, TimeUnit.SECONDS);
            ownWorkers.shutdownGracefully(0, 2, TimeUnit.SECONDS);
            ownBoss = null;
            ownWorkers = null;
        }
    }
}
