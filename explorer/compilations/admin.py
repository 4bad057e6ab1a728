from django.contrib import admin

from explorer.compilations.models import Compilation, CompilationEvent, UploadedModel


@admin.register(UploadedModel)
class UploadedModelAdmin(admin.ModelAdmin):
    list_display = ("name", "sha256", "size", "opset", "node_count", "source", "created_at")
    search_fields = ("name", "sha256", "graph_name")
    readonly_fields = ("sha256", "size", "created_at")


class CompilationEventInline(admin.TabularInline):
    model = CompilationEvent
    fields = ("seq", "type", "ts")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Compilation)
class CompilationAdmin(admin.ModelAdmin):
    list_display = ("id", "model", "target", "status", "attempts", "worker", "created_at", "finished_at")
    list_filter = ("status", "target")
    search_fields = ("id", "model__name", "model__sha256")
    readonly_fields = ("id", "cache_key", "created_at", "started_at", "heartbeat_at", "finished_at")
    inlines = [CompilationEventInline]


@admin.register(CompilationEvent)
class CompilationEventAdmin(admin.ModelAdmin):
    list_display = ("compilation", "seq", "type", "ts")
    list_filter = ("type",)
    search_fields = ("compilation__id",)
