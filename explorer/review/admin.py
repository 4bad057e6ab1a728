from django.contrib import admin

from explorer.review.models import Comment, Review, ReviewEvent


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ("id", "compilation", "author", "kind", "parent", "resolved", "created_at")
    list_filter = ("kind", "resolved")
    search_fields = ("compilation__id", "author__username", "body")


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("id", "compilation", "author", "verdict", "created_at")
    list_filter = ("verdict",)


@admin.register(ReviewEvent)
class ReviewEventAdmin(admin.ModelAdmin):
    list_display = ("model", "seq", "type", "compilation", "comment", "review")
