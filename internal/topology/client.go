package topology

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// NewClient returns a Pub/Sub client of project, with opts. With endpoint
// set it talks to that in-process server without credentials (local
// mode); otherwise the client's own rules apply, PUBSUB_EMULATOR_HOST
// included. Against an emulator (either) its pull streams send no
// keep-alive pings (emulatorPings), before any interceptor of opts sees
// them.
func NewClient(ctx context.Context, project, endpoint string, opts ...option.ClientOption) (*pubsub.Client, error) {
	if endpoint != "" || os.Getenv("PUBSUB_EMULATOR_HOST") != "" {
		opts = append([]option.ClientOption{option.WithGRPCDialOption(emulatorPings())}, opts...)
	}
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	c, err := pubsub.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	return c, nil
}

// SubscriptionName is a subscription's full name, as the start-up check,
// Setup and the pull streams' routing header (the pull watch's keys) say
// it.
func SubscriptionName(project, id string) string {
	return "projects/" + project + "/subscriptions/" + id
}

// SubscriptionError is a subscription of CheckSubscriptions that cannot
// be pulled as it is set: not found, or not pullable by this identity.
type SubscriptionError struct {
	Index int    // the subscription's place in the ids checked
	msg   string // names the subscription and the project
}

func (e *SubscriptionError) Error() string { return e.msg }

// CheckSubscriptions returns nil if every subscription of ids (of c's
// project) exists and this identity may pull it. Else it names the first
// that fails and the project: a *SubscriptionError if it is not found (a
// wrong project, or setup not run) or not readable (a role missing), any
// other error if Pub/Sub does not answer within timeout (a wrong
// PUBSUB_EMULATOR_HOST, egress blocked, an outage). Reading a
// subscription takes pubsub.subscriptions.get, which
// roles/pubsub.subscriber lacks: refused that, it asks whether the
// identity may pull (pubsub.subscriptions.consume) instead. The errors
// quote Pub/Sub's, which may span lines.
func CheckSubscriptions(ctx context.Context, c *pubsub.Client, ids []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, id := range ids {
		name := SubscriptionName(c.Project(), id)
		_, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name})
		code := status.Code(err)
		if code == codes.PermissionDenied && mayConsume(ctx, c, name) {
			continue
		}
		what := fmt.Sprintf("subscription %q of project %q", id, c.Project())
		switch code {
		case codes.OK:
		case codes.NotFound:
			return &SubscriptionError{i, what + " not found (a wrong PUBSUB_PROJECT_ID, or 'dispatcher setup' not run): " + err.Error()}
		case codes.PermissionDenied, codes.Unauthenticated:
			return &SubscriptionError{i, what + ": this identity may not pull it (roles/pubsub.subscriber on it, docs/deploying.md): " + err.Error()}
		default:
			return fmt.Errorf("pubsub: %s: no answer within %v (PUBSUB_EMULATOR_HOST, egress to pubsub.googleapis.com): %s", what, timeout, err.Error())
		}
	}
	return nil
}

// mayConsume reports whether this identity may pull subscription name.
func mayConsume(ctx context.Context, c *pubsub.Client, name string) bool {
	const consume = "pubsub.subscriptions.consume"
	r, err := c.SubscriptionAdminClient.TestIamPermissions(ctx, &iampb.TestIamPermissionsRequest{Resource: name, Permissions: []string{consume}})
	return err == nil && slices.Contains(r.GetPermissions(), consume)
}

// TopicError is a topic of CheckTopics that cannot be published to as it
// is set: not found, or not publishable by this identity.
type TopicError struct {
	Index int    // the topic's place in the ids checked
	msg   string // names the topic and the project
}

func (e *TopicError) Error() string { return e.msg }

// CheckTopics returns nil if every topic of ids (of c's project) exists
// and this identity may publish to it; else it names the first that fails
// and the project, as CheckSubscriptions does: a *TopicError if it is not
// found or not publishable, any other error if Pub/Sub does not answer
// within timeout. Reading a topic takes pubsub.topics.get, which
// roles/pubsub.publisher lacks: refused that, it asks whether the
// identity may publish (pubsub.topics.publish) instead.
func CheckTopics(ctx context.Context, c *pubsub.Client, ids []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, id := range ids {
		name := "projects/" + c.Project() + "/topics/" + id
		_, err := c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: name})
		code := status.Code(err)
		if code == codes.PermissionDenied && mayPublish(ctx, c, name) {
			continue
		}
		what := fmt.Sprintf("topic %q of project %q", id, c.Project())
		switch code {
		case codes.OK:
		case codes.NotFound:
			return &TopicError{i, what + " not found (a wrong PUBSUB_PROJECT_ID, or 'dispatcher setup' not run): " + err.Error()}
		case codes.PermissionDenied, codes.Unauthenticated:
			return &TopicError{i, what + ": this identity may not publish to it (roles/pubsub.publisher on it, docs/deploying.md): " + err.Error()}
		default:
			return fmt.Errorf("pubsub: %s: no answer within %v (PUBSUB_EMULATOR_HOST, egress to pubsub.googleapis.com): %s", what, timeout, err.Error())
		}
	}
	return nil
}

// mayPublish reports whether this identity may publish to topic name.
func mayPublish(ctx context.Context, c *pubsub.Client, name string) bool {
	const publish = "pubsub.topics.publish"
	r, err := c.TopicAdminClient.TestIamPermissions(ctx, &iampb.TestIamPermissionsRequest{Resource: name, Permissions: []string{publish}})
	return err == nil && slices.Contains(r.GetPermissions(), publish)
}
