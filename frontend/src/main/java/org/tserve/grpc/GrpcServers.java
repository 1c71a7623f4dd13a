package org.tserve.grpc;

import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.ProtoReflectionServiceV1;
import io.netty.channel.EventLoopGroup;
import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;
import org.apache.logging.log4j.Logger;
import org.pytorch.serve.grpc.inference.InferenceAPIsServiceGrpc;
import org.pytorch.serve.grpc.management.ManagementAPIsServiceGrpc;
import org.pytorch.serve.grpc.openinference.GRPCInferenceServiceGrpc;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.server.ResponseListeners;
import org.tserve.util.Logging;
import org.tserve.util.NettyTransport;
import org.tserve.wlm.ModelManager;

/**
 * The two gRPC servers: inference on {@code grpc_inference_address:grpc_inference_port} (7070;
 * TorchServe's inference service and the Open Inference Protocol's GRPCInferenceService) and
 * management on {@code grpc_management_address:grpc_management_port} (7071), TLS with
 * {@code enable_grpc_ssl=true} ({@code certificate_file}, {@code private_key_file}), inbound
 * messages up to {@code max_request_size}, token authorization like REST. Both also serve the
 * standard {@code grpc.health.v1.Health} (no token: probes cannot send one) and, with
 * {@code enable_grpc_reflection}, server reflection (v1 and v1alpha, behind the port's token),
 * and both carry the HTTP/2 abuse limits of {@link #limits}.
 */
public final class GrpcServers {
    private static final Logger LOG = Logging.logger(GrpcServers.class);

    private final List<Server> servers = new ArrayList<>();
    private EventLoopGroup boss;
    private EventLoopGroup workers;
    private GrpcHealth health;
    private Server inference;
    private Server management;

    /** Starts both servers on their own event loops (the transport {@code use_native_io} picks). */
    public static GrpcServers start(ConfigManager cfg, ModelManager models, TokenAuthorization auth,
            ResponseListeners responses) throws IOException {
        GrpcServers g = new GrpcServers();
        NettyTransport transport = NettyTransport.choose(cfg.getBool("use_native_io")).logFor("gRPC");
        g.boss = transport.newGroup(1, "grpc-accept");
        g.workers = transport.newGroup(Math.max(2, Runtime.getRuntime().availableProcessors()), "grpc");
        Set<String> open = cfg.getBool("health_check_no_auth") ? AuthInterceptor.PROBES : Set.of();
        try {
            g.health = new GrpcHealth(models, List.of(InferenceAPIsServiceGrpc.SERVICE_NAME,
                    GRPCInferenceServiceGrpc.SERVICE_NAME, ServiceAlias.OIP_STANDARD_NAME, ManagementAPIsServiceGrpc.SERVICE_NAME));
            AuthInterceptor inferenceAuth = new AuthInterceptor(auth, TokenAuthorization.KeyType.INFERENCE, open);
            // one implementation, served under TorchServe's name and KServe's/Triton's (ServiceAlias)
            io.grpc.ServerServiceDefinition oip = ServerInterceptors.intercept(new OpenInferenceService(models,
                    serverVersion(), responses), new CallContextInterceptor(), inferenceAuth);
            NettyServerBuilder b = g.build(cfg, "inference", transport)
                .addService(ServerInterceptors.intercept(new InferenceService(models, responses), new CallContextInterceptor(), inferenceAuth))
                .addService(oip)
                .addService(ServiceAlias.as(ServiceAlias.OIP_STANDARD_NAME, oip));
            g.inference = g.withStandardServices(cfg, b, inferenceAuth).build().start();
            g.servers.add(g.inference);
            AuthInterceptor managementAuth = new AuthInterceptor(auth, TokenAuthorization.KeyType.MANAGEMENT, Set.of());
            b = g.build(cfg, "management", transport)
                .addService(ServerInterceptors.intercept(new ManagementService(models, cfg.isModelApiEnabled()),
                    new CallContextInterceptor(), managementAuth));
            g.management = g.withStandardServices(cfg, b, managementAuth).build().start();
            g.servers.add(g.management);
        } catch (IOException | RuntimeException e) {
            g.stop();
            throw e;
        }
        LOG.info("gRPC inference API bound to " + g.inference.getListenSockets()
                + ", gRPC management API bound to " + g.management.getListenSockets());
        return g;
    }

    /** Health on every port; reflection (when enabled) behind the port's token like its APIs. */
    @SuppressWarnings("deprecation")   // v1alpha reflection: grpcio-reflection's client and older grpcurl ask for it
    private NettyServerBuilder withStandardServices(ConfigManager cfg, NettyServerBuilder b, AuthInterceptor auth) {
        b.addService(health.service());
        if (cfg.getBool("enable_grpc_reflection")) {
            b.addService(ServerInterceptors.intercept(ProtoReflectionServiceV1.newInstance(), auth));
            b.addService(ServerInterceptors.intercept(io.grpc.protobuf.services.ProtoReflectionService.newInstance(), auth));
        }
        return b;
    }

    private NettyServerBuilder build(ConfigManager cfg, String which, NettyTransport transport) throws SSLException {
        String host = cfg.get("grpc_" + which + "_address");
        int port = cfg.getInt("grpc_" + which + "_port");
        ConnectionCap cap = new ConnectionCap(which, cfg.getInt("grpc_max_connections"));
        NettyServerBuilder b = NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
            .channelFactory(cap.channelFactory(transport.serverChannel()))
            .bossEventLoopGroup(boss)
            .workerEventLoopGroup(workers)
            .maxInboundMessageSize(cfg.getInt("max_request_size"));
        limits(cfg, which, b);
        if (cfg.getBool("enable_grpc_ssl")) {
            File cert = pemFile(cfg, "certificate_file");
            File key = pemFile(cfg, "private_key_file");
            b.sslContext(GrpcSslContexts.forServer(cert, key).build());
        }
        return b;
    }

    /**
     * The HTTP/2 limits every connection gets: reset streams per window (CVE-2023-44487, "rapid
     * reset": over the limit the connection gets GOAWAY), calls in flight per connection,
     * keepalive (server PINGs, and how often a client may PING), idle and age limits.
     */
    static void limits(ConfigManager cfg, String which, NettyServerBuilder b) {
        int rst = cfg.getInt("grpc_max_rst_frames_per_window");
        if (rst > 0) {
            b.maxRstFramesPerWindow(rst, Math.max(1, cfg.getInt("grpc_rst_frames_window_s")));
        }
        int streams = cfg.getInt("grpc_max_concurrent_streams");
        if (streams > 0) {
            b.maxConcurrentCallsPerConnection(streams);
        }
        b.keepAliveTime(positiveOr(keepAliveMs(cfg.getLong("grpc_keepalive_time_ms"))), TimeUnit.MILLISECONDS);
        b.keepAliveTimeout(positiveOr(cfg.getLong("grpc_keepalive_timeout_ms")), TimeUnit.MILLISECONDS);
        b.permitKeepAliveTime(Math.max(0, cfg.getLong("grpc_permit_keepalive_time_ms")), TimeUnit.MILLISECONDS);
        b.permitKeepAliveWithoutCalls(cfg.getBool("grpc_permit_keepalive_without_calls"));
        long idle = cfg.getLong("grpc_max_connection_idle_ms");
        if (idle > 0) {
            b.maxConnectionIdle(idle, TimeUnit.MILLISECONDS);
        }
        long age = cfg.getLong("grpc_" + which + "_max_connection_age_ms");
        if (age > 0 && age < Long.MAX_VALUE) {
            b.maxConnectionAge(age, TimeUnit.MILLISECONDS);
        }
        long grace = cfg.getLong("grpc_" + which + "_max_connection_age_grace_ms");
        if (grace > 0 && grace < Long.MAX_VALUE) {
            b.maxConnectionAgeGrace(grace, TimeUnit.MILLISECONDS);
        }
    }

    /** grpc-java raises a server keepalive time below 10 s to 10 s (KeepAliveManager's minimum). */
    static final long MIN_KEEPALIVE_MS = 10_000;

    /** The keepalive time grpc-java will use for {@code ms}, said in the log when it is not {@code ms}. */
    static long keepAliveMs(long ms) {
        if (ms > 0 && ms < MIN_KEEPALIVE_MS) {
            LOG.warn("grpc_keepalive_time_ms=" + ms + " is below gRPC's minimum: the server PINGs idle connections every "
                    + MIN_KEEPALIVE_MS + " ms (set " + MIN_KEEPALIVE_MS + " or more, or 0 for never)");
            return MIN_KEEPALIVE_MS;
        }
        return ms;
    }

    /** 0 or less means "never" (grpc-java's own spelling of it is Long.MAX_VALUE). */
    private static long positiveOr(long ms) {
        return ms > 0 ? ms : Long.MAX_VALUE;
    }

    private static String serverVersion() {
        try {
            return org.tserve.server.ServerVersion.get();
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

    /** Turns health NOT_SERVING, stops accepting calls, gives running calls up to 5 s, then closes the event loops. */
    public void stop() {
        if (health != null) {
            health.stop();
        }
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
        if (boss != null) {
            boss.shutdownGracefully(0, 2, TimeUnit.SECONDS);
            workers.shutdownGracefully(0, 2, TimeUnit.SECONDS);
            boss = null;
            workers = null;
        }
    }
}
